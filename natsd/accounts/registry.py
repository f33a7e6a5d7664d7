"""Accounts: each one an isolated subject space with its own sublist and connection count.

Exports, imports and subject mappings build on this (see DESIGN.md); this module owns the
account registry and the per-account limits.
"""
from natsd._core.sublist import Sublist

GLOBAL_ACCOUNT = "$G"
DEFAULT_SYSTEM_ACCOUNT = "$SYS"


class Account:
    __slots__ = ("name", "sublist", "clients", "max_connections", "max_subscriptions",
                 "max_payload", "max_leafnodes", "config", "is_system", "jetstream", "mappings",
                 "jwt", "updated", "internal_client", "remote_conns", "trace_dest", "trace_sampling",
                 "gateway_subs")

    def __init__(self, name, config=None):
        self.name = name
        self.sublist = Sublist(name.encode())
        self.clients = set()            # Connections bound to this account
        self.config = config
        self.is_system = False
        self.jetstream = False
        self.mappings = None            # MappingTable, set by the registry
        self.jwt = None                 # operator mode: the account's natsd.auth.jwt.claims.Claims
        self.updated = None             # when its JWT was last applied (unix time)
        self.internal_client = None     # natsd.ids.InternalClient of its service imports
        self.remote_conns = {}          # another server's id -> (connections, leaf nodes) it reports
        # other clusters' interest held in the sublist (gateway connections' subscriptions):
        # not the account's subscriptions as monitoring counts them
        self.gateway_subs = 0
        # `msg_trace`: where messages with an external `traceparent` header are traced, and
        # which share of them (percent)
        trace = getattr(config, "msg_trace", None) or {}
        self.trace_dest = trace.get("dest", "")
        self.trace_sampling = trace.get("sampling", 0)
        limits = getattr(config, "limits", None)
        self.max_connections = _limit(limits, "max_connections")
        self.max_subscriptions = _limit(limits, "max_subscriptions")
        self.max_payload = _limit(limits, "max_payload")
        self.max_leafnodes = _limit(limits, "max_leafnodes")

    def remote_clients(self):
        """The account's client connections on the cluster's other servers, as they report
        them (natsd/system/remote.py)."""
        return sum(conns for conns, _ in self.remote_conns.values())

    @property
    def subscription_count(self):
        """The account's subscriptions as nats-server counts them (its sublist without other
        clusters' interest)."""
        return self.sublist.count - self.gateway_subs

    @property
    def name_tag(self):
        """What monitoring and events call the account: its JWT's name, else its own."""
        return (self.jwt.name if self.jwt is not None else "") or self.name

    def __repr__(self):
        return "<Account %s>" % self.name


def _limit(limits, key):
    """-1 means unlimited, as in nats-server's account limits."""
    if limits is None:
        return -1
    v = limits.get(key) if isinstance(limits, dict) else getattr(limits, key, None)
    return -1 if v is None else v


class AccountRegistry:
    """Every account of the server, built from Options.accounts plus $G and the system account;
    operator mode adds the accounts of its JWTs as they are looked up (`add`), and whoever
    keeps something per account learns of them through `on_add`."""

    def __init__(self, opts):
        self.accounts = {}
        self.on_add = []                # callables(account), run for each account added later
        self.on_update = []             # callables(account), run when an account's JWT changed
        self.sublist_cache = not opts.disable_sublist_cache
        self.on_add.append(self._cache_setting)
        for name, cfg in (opts.accounts or {}).items():
            self.accounts[name] = Account(name, cfg)
            self.accounts[name].jetstream = bool(getattr(cfg, "jetstream", False))
        if GLOBAL_ACCOUNT not in self.accounts:
            self.accounts[GLOBAL_ACCOUNT] = Account(GLOBAL_ACCOUNT)
        self._install_mappings(opts)
        self.system_name = None
        if opts.operator_mode and not opts.system_account:
            # nats-server's default system account is only made where $SYS does not exist
            # yet, and operator mode has registered it by then: there is none
            self.accounts.setdefault(DEFAULT_SYSTEM_ACCOUNT, Account(DEFAULT_SYSTEM_ACCOUNT))
        elif not opts.no_system_account:
            self.system_name = opts.system_account or DEFAULT_SYSTEM_ACCOUNT
            if self.system_name not in self.accounts:
                self.accounts[self.system_name] = Account(self.system_name)
            self.accounts[self.system_name].is_system = True
        for acc in self.accounts.values():
            self._cache_setting(acc)

    def _cache_setting(self, acc):
        """`disable_sublist_cache`: every account's sublist matches without its result cache."""
        acc.sublist.cache_enabled = self.sublist_cache

    def _install_mappings(self, opts):
        """Each account's `mappings {}` (the top-level block is the global account's), and the
        rules `default_js_domain` adds after them to an account without JetStream."""
        defaults = {name: d for name, d in opts.default_js_domain.items() if d}
        if not opts.mappings and not defaults and not any(getattr(a.config, "mappings", None)
                                                          for a in self.accounts.values()):
            return
        from natsd.accounts.mappings import MappingTable, default_domain_rules
        cluster = getattr(getattr(opts, "cluster", None), "name", "") or ""
        for acc in self.accounts.values():
            rules = dict(getattr(acc.config, "mappings", None) or {})
            if acc.name == GLOBAL_ACCOUNT and opts.mappings:
                rules = dict(opts.mappings)
            if acc.name in defaults and not getattr(acc.config, "jetstream", False):
                rules.update(default_domain_rules(defaults[acc.name]))
            if rules:
                acc.mappings = MappingTable.from_options(rules, cluster)

    def add(self, name):
        """A new, empty account (operator mode: made from its JWT by natsd.auth.jwt.accounts)."""
        acc = self.accounts[name] = Account(name)
        for hook in self.on_add:
            hook(acc)
        return acc

    def get(self, name):
        return self.accounts.get(name or GLOBAL_ACCOUNT)

    @property
    def global_account(self):
        return self.accounts[GLOBAL_ACCOUNT]

    @property
    def system(self):
        return self.accounts.get(self.system_name) if self.system_name else None

    def __iter__(self):
        return iter(self.accounts.values())

    def __len__(self):
        return len(self.accounts)
