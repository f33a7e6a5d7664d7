"""Every config key the loader knows has a test showing its effect, or is refused.

This file owns the table of evidence for config keys.  The keys are read from the loader's
code, never copied by hand: the top level from `_Loader._top_level()` (aliases included), each
block from the section modules' source with `ast` (the strings a lower-cased key is compared
with, the module-level key sets of tls/websocket/mqtt, the `dispatch` table of
`authorization`, the resolver map's lookups), placed by BLOCKS at their path in the config
("leafnodes.remotes[].first_info_timeout").  A key whose path is refused by natsd
(natsd.conf.unsupported.CONFIG; a block refused as a whole refuses all its keys; a row that
refuses only some values, as `proxy_protocol: true`, counts too) needs no test.  Every other key is either in EVIDENCE -- the test showing what it does -- or in
NO_EVIDENCE_YET with a reason, and that list may only shrink: a key added to the loader
without an entry fails here, and so does an entry of NO_EVIDENCE_YET that got a test or a
refusal.

A test is evidence for a key when it would fail if natsd ignored the key: it runs a server
(or natsd's own code) with the key set and checks what the key changes.  Not evidence: that
the file loads, that Options holds the value, that /varz reports it, that a reload of it is
refused, a flag setting the same option, or a test run against nats-server alone.  The test
harness passes `-p -1 -a 127.0.0.1` (tests/support/servers.py), so a config's client port and
host are not exercised by most tests.

A block one function reads wherever it appears (a `tls {}` block, permissions, a mapping
destination) is keyed once, at the place named in BLOCKS; the key that opens it elsewhere
(`cluster.tls`, `accounts.*.mappings`) is a key of its own.  Table entries may name aliases
together: "leafnodes.remotes[].url|urls" stands for both.  An EVIDENCE entry may group only
names the loader takes at one site (one handler at the top level, one comparison in a block):
that is checked here.  That natsd's runtime then reads them alike (a raw `tls {}` or
`websocket {}` block is read again at start) is the table's care.
"""
from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

from natsd.conf import unsupported
from natsd.conf.load import _Loader

ROOT = Path(__file__).resolve().parents[2]

SECTION_MODULES = ("natsd/conf/links.py", "natsd/conf/jetstream.py", "natsd/conf/accounts.py",
                   "natsd/conf/auth.py", "natsd/conf/operator.py")

# (section function, key variable as written in it) -> the config paths of the block whose keys
# it compares.  An empty tuple: the variable holds names that are not config keys.
BLOCKS: dict[tuple[str, str], tuple[str, ...]] = {
    ("leafnodes", "lk"): ("leafnodes",),
    ("leaf_authorization", "lk"): ("leafnodes.authorization",),
    ("leaf_authorization", "luk"): ("leafnodes.authorization.users[]",),
    ("remotes", "lk"): ("leafnodes.remotes[]",),
    ("leaf_proxy", "lk"): ("leafnodes.remotes[].proxy",),
    ("address_key", "lk"): ("leafnodes", "cluster", "gateway"),
    ("_link_block", "lk"): ("cluster", "gateway"),
    ("cluster", "lk"): ("cluster",),
    ("gateway", "lk"): ("gateway",),
    ("gateway_auth", "lak"): ("gateway.authorization",),
    ("remote_gateways", "lgk"): ("gateway.gateways[]",),
    ("tls", "lk"): ("tls",),
    ("_tls_value_problem", "lk"): ("tls",),
    ("listener_block", "lk"): ("websocket", "mqtt"),
    ("compression", "lmk"): ("cluster.compression", "leafnodes.compression", "leafnodes.remotes[].compression"),
    ("jetstream", "lk"): ("jetstream",),
    ("js_limits", "lk"): ("jetstream.limits",),
    ("js_limits", "bk"): ("jetstream.limits.batch",),
    ("accounts", "name"): (),          # account names
    ("accounts", "lk"): ("accounts.*",),
    ("account_jetstream", "lk"): ("accounts.*.jetstream",),
    ("account_limits", "k"): ("accounts.*.limits",),
    ("msg_trace", "k"): ("accounts.*.msg_trace", "accounts.*.trace_dest"),
    ("account_exports", "lk"): ("accounts.*.exports[]",),
    ("latency", "k"): ("accounts.*.exports[].latency",),
    ("account_imports", "lk"): ("accounts.*.imports[]",),
    ("account_imports", "sk"): ("accounts.*.imports[].stream", "accounts.*.imports[].service"),
    ("map_dest", "lk"): ("mappings.*",),
    ("authorization", "dispatch"): ("authorization",),
    ("auth_callout", "lk"): ("authorization.auth_callout",),
    ("users", "lk"): ("authorization.users[]", "accounts.*.users[]"),
    ("permissions", "lk"): ("authorization.users[].permissions",),
    ("allow_responses", "lk"): ("authorization.users[].permissions.allow_responses",),
    ("subject_permission", "k"): ("authorization.users[].permissions.publish",
                                  "authorization.users[].permissions.subscribe"),
    ("_resolver_map", "v"): ("resolver",),
}

# Module-level sets of known keys -> the block they list.
SET_BLOCKS = {"_TLS_BOOLS": "tls", "_TLS_OTHER": "tls", "_TLS_CHECKED": "tls", "_WEBSOCKET_FIELDS": "websocket",
              "_MQTT_FIELDS": "mqtt", "_MQTT_DURATIONS": "mqtt", "_MQTT_PENDING": "mqtt", "_ORIGINS": "websocket"}


# -- the keys the loader knows --------------------------------------------------------------
# Each key comes with its "sites": where the loader accepts it.  Aliases share a site (the
# same handler, or one `lk in ("a", "b")` comparison); the converse does not hold: `http` and
# `https` share a handler that tells them apart.

def _handler_site(h) -> tuple:
    """One site for handlers that do the same: the same function, or the same code over the
    same captured values (`attr("host", self.s)` made twice)."""
    def hashable(x):
        try:
            hash(x)
            return x
        except TypeError:
            return ("id", id(x))
    code = getattr(h, "__code__", None)
    if code is None:
        return ("top", id(h))
    return ("top", code, tuple(hashable(c.cell_contents) for c in h.__closure__ or ()))


def top_level_keys() -> dict[str, set]:
    return {k: {_handler_site(h)} for k, h in _Loader({}, "x.conf")._top_level().items()}


def _strings(node: ast.AST) -> list[str] | None:
    """The strings of a literal: a string, or a tuple/set/list of them, or a dict's keys."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.Set, ast.List)):
        elts = node.elts
    elif isinstance(node, ast.Dict):
        elts = node.keys
    else:
        return None
    if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
        return [e.value for e in elts]
    return None


def _assignments(scope: ast.AST) -> dict[str, ast.AST]:
    """name -> the value assigned to it in this scope (plain `name = value` only)."""
    return {node.targets[0].id: node.value for node in ast.walk(scope)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)}


def _is_lower_call(node, names=None) -> bool:
    """`x.lower()` (with x one of `names`, when given)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "lower" and isinstance(node.func.value, ast.Name)
            and (names is None or node.func.value.id in names))


class _Section:
    """The key comparisons of one section function -> found: (variable, block, key, site)."""

    def __init__(self, fn: ast.FunctionDef, module_names: dict[str, ast.AST]):
        self.fn, self.module_names = fn, module_names
        self.local_names = _assignments(fn)
        self.found: list[tuple[str, str | None, str, tuple]] = []
        self.vars: set[str] = set()
        self.problems: list[str] = []
        self.key_vars = self._key_vars()
        self.lowered_maps = {name for name, v in self.local_names.items()
                             if isinstance(v, ast.DictComp) and _is_lower_call(v.key)}

    def _key_vars(self) -> set[str]:
        """A map's keys as a loop gives them (`for k, v in ...`), lower-cased copies of them
        (`lk = k.lower()`) and a key handed over as `lk`."""
        names = {a.arg for a in self.fn.args.args if a.arg == "lk"}
        for node in ast.walk(self.fn):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Tuple):
                first = node.target.elts[0]
                if isinstance(first, ast.Name):
                    names.add(first.id)
        names |= {name for name, v in self.local_names.items() if _is_lower_call(v, names)}
        return names

    def _key_var(self, node) -> str | None:
        """The variable a key expression reads: `lk`, or `bk` of `bk.lower()`."""
        if isinstance(node, ast.Name) and node.id in self.key_vars:
            return node.id
        if _is_lower_call(node, self.key_vars):
            return node.func.value.id
        return None

    def _resolve(self, node, seen=()) -> list[tuple[str | None, list[str], bool]]:
        """The key strings a comparator stands for: (block of a module-level set or None,
        keys, whether they are one literal of the comparison itself)."""
        got = _strings(node)
        if got is not None:
            return [(None, got, not seen)]
        if isinstance(node, ast.IfExp):
            return self._resolve(node.body, seen) + self._resolve(node.orelse, seen)
        if isinstance(node, ast.Name) and node.id not in seen:
            if node.id in self.local_names:
                return self._resolve(self.local_names[node.id], seen + (node.id,))
            if node.id in self.module_names:
                if node.id not in SET_BLOCKS:
                    self.problems.append(f"{self.fn.name}: module set {node.id} is not in SET_BLOCKS")
                    return []
                return [(SET_BLOCKS[node.id], _strings(self.module_names[node.id]) or [], False)]
        self.problems.append(f"{self.fn.name}: cannot read the keys of {ast.unparse(node)}")
        return []

    def _loop_strings(self, name: str) -> list[str] | None:
        """`for key in ("a", "b")`: the strings `key` takes."""
        for node in ast.walk(self.fn):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == name:
                return _strings(node.iter)
        return None

    def _add(self, var: str, block: str | None, keys, site=None):
        """Keys found; `site` shared by all of them (aliases), or one site per key."""
        self.vars.add(var)
        for k in keys:
            self.found.append((var, block, k, site or (self.fn.name, var, k)))

    def scan(self) -> "_Section":
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Compare) and len(node.ops) == 1:
                self._compare(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                self._call(node)
            elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                  and node.value.id in self.lowered_maps):
                self._add(node.value.id, None, _strings(node.slice) or [])
        return self

    def _compare(self, node: ast.Compare):
        op, right = node.ops[0], node.comparators[0]
        var = self._key_var(node.left)
        if var is not None and BLOCKS.get((self.fn.name, var)) == ():
            self._add(var, None, [])            # names, not keys: nothing to read
        elif var is not None and isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
            for block, keys, literal in self._resolve(right):
                self._add(var, block, keys, (self.fn.name, node.lineno, node.col_offset) if literal else None)
        elif (isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, ast.Name)
              and right.id in self.lowered_maps):
            # `"dir" in v` / `key in v` on a map of lower-cased keys.
            keys = _strings(node.left)
            if keys is None and isinstance(node.left, ast.Name):
                keys = self._loop_strings(node.left.id)
            if keys is None:
                self.problems.append(f"{self.fn.name}: cannot read the keys of {ast.unparse(node)}")
            else:
                self._add(right.id, None, keys)

    def _call(self, node: ast.Call):
        if node.func.attr == "dispatch" and len(node.args) == 2 and isinstance(node.args[1], ast.Dict):
            # `self.dispatch(m, {"key": handler, ...})`: keys with the same handler are aliases
            for k, v in zip(node.args[1].keys, node.args[1].values):
                self._add("dispatch", None, _strings(k) or [], ("dispatch", ast.unparse(v)))
        elif (node.func.attr == "get" and node.args and self._key_var(node.args[0]) is not None
              and isinstance(node.func.value, ast.Name)):
            # `fields.get(k.lower())` on a table of the block's keys: one value, one meaning
            table = self.local_names.get(node.func.value.id)
            var = self._key_var(node.args[0])
            if isinstance(table, ast.Dict) and _strings(table) is not None:
                for k, v in zip(table.keys, table.values):
                    self._add(var, None, [k.value], ("get", ast.unparse(v)))
            else:
                self.problems.append(f"{self.fn.name}: cannot read the keys of {ast.unparse(node)}")


def section_keys() -> tuple[dict[str, set], list[str], set[tuple[str, str]]]:
    """({block key path: its sites}, problems, the BLOCKS entries used)."""
    keys: dict[str, set] = {}
    problems: list[str] = []
    used: set[tuple[str, str]] = set()
    for rel in SECTION_MODULES:
        tree = ast.parse((ROOT / rel).read_text(), rel)
        module_names = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                        for t in n.targets if isinstance(t, ast.Name)}
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            sec = _Section(fn, module_names).scan()
            problems += [f"{rel}: {p}" for p in sec.problems]
            used |= {(fn.name, var) for var in sec.vars if (fn.name, var) in BLOCKS}
            for var, block, key, site in sec.found:
                if block is not None:
                    paths = [block]
                elif (fn.name, var) in BLOCKS:
                    paths = BLOCKS[fn.name, var]
                else:
                    problems.append(f"{rel}: {fn.name}() compares {var!r} with {key!r}: "
                                    f"add ({fn.name!r}, {var!r}) to BLOCKS")
                    continue
                for b in paths:
                    keys.setdefault(f"{b}.{key}", set()).add(site)
    return keys, problems, used


def known_keys() -> dict[str, set]:
    return {**top_level_keys(), **section_keys()[0]}


# -- paths, refusals, the tables -------------------------------------------------------------

def expand(entry: str) -> list[str]:
    """'a|b.c[].d|e' -> the four paths it names."""
    choices = [[n + "[]" for n in seg[:-2].split("|")] if seg.endswith("[]") else seg.split("|")
               for seg in entry.split(".")]
    return [".".join(p) for p in itertools.product(*choices)]


def _segment_matches(row_seg: str, key_seg: str) -> bool:
    names = set(row_seg.removesuffix("[]").split("|"))
    return "*" in names or key_seg.removesuffix("[]") in names


def refused(path: str) -> bool:
    """Is the key refused by natsd -- by a row of its own path or of a block holding it?"""
    segs = path.split(".")
    for _feature, row, _when in unsupported.CONFIG:
        rsegs = row.split(".")
        if len(rsegs) <= len(segs) and all(map(_segment_matches, rsegs, segs)):
            return True
    return False


def _table_paths(table: dict[str, str]) -> dict[str, str]:
    return {p: entry for entry in table for p in expand(entry)}


def _test_exists(ref: str) -> bool:
    file, _, name = ref.partition("::")
    path = ROOT / file
    if not (file.startswith("tests/") and name and path.is_file()):
        return False
    return re.search(rf"^\s*(async\s+)?def {re.escape(name)}\(", path.read_text(), re.M) is not None


_LAUNCHER = "tests/core/test_launcher_lines.py::test_listener_lines_are_nats_servers"
_ROTATE = "tests/core/test_log_destinations.py::test_log_file_rotates_and_keeps_the_newest_backups"
_LIMITS = "tests/accounts/test_accounts_e2e.py::test_account_max_connections"
_IMPORTS = "tests/accounts/test_imports_e2e.py::test_stream_imports"
_RESPONSES = "tests/accounts/test_imports_e2e.py::test_service_response_types"
_LATENCY = "tests/accounts/test_service_latency.py::test_service_latency_matches_nats_server"
_CALLOUT = "tests/auth/test_auth_callout.py::test_auth_callout_matches_nats_server"
_PUB_PERMS = "tests/core/test_auth_e2e.py::test_publish_permissions"
_SUB_PERMS = "tests/core/test_auth_e2e.py::test_subscribe_permissions"
_JS_LIMITS = "tests/jetstream/test_server_limits.py::test_server_limits_match_the_reference"
_ENCRYPTED = "tests/jetstream/test_encryption.py::test_nothing_in_plaintext_on_disk"
_DENY = "tests/leaf/test_leaf_rules.py::test_deny_imports_and_exports"
_LEAF_NKEY = "tests/leaf/test_leaf_admission.py::test_leaf_nkey_authorization"
_FULL_RESOLVER = "tests/auth/test_resolver.py::test_full_resolver_matches_nats_server"
_TLS = "tests/core/test_tls.py::"
_SC = "tests/gateways/test_supercluster.py::"
_GWE = "tests/gateways/test_gateway_errors.py::"
_PROXY = "tests/leaf/test_leaf_proxy.py::"
_ISO = "tests/leaf/test_leaf_isolation.py::test_isolated_leaf_connections_hear_no_other_leafs_interest"
_WS_AUTH = "tests/core/test_websocket.py::test_websocket_authorization_and_cookies"
_INGEST = "tests/jetstream/test_ingest_limits.py::test_a_burst_beyond_the_ingest_queue_is_answered_429"
_TOP_MAPPINGS = "tests/accounts/test_accounts_e2e.py::test_top_level_mappings_apply_to_global_account"

# key path (aliases with `|`) -> the test showing what it does
EVIDENCE: dict[str, str] = {
    # -- mqtt (tests/mqtt: each scenario against natsd and nats-server)
    "mqtt": "tests/mqtt/test_mqtt_wire.py::test_subscribe_publish_and_acks",
    "mqtt.port": "tests/mqtt/test_mqtt_wire.py::test_connack_codes",
    "mqtt.host": "tests/mqtt/test_mqtt_options.py::test_listener_address",
    "mqtt.net": "tests/mqtt/test_mqtt_options.py::test_listener_address",
    "mqtt.listen": "tests/mqtt/test_mqtt_options.py::test_listener_address",
    "mqtt.authorization": "tests/mqtt/test_mqtt_options.py::test_block_authorization",
    "mqtt.authentication": "tests/mqtt/test_mqtt_options.py::test_block_authorization",
    "mqtt.no_auth_user": "tests/mqtt/test_mqtt_options.py::test_no_auth_user_binds_its_account",
    "mqtt.max_ack_pending": "tests/mqtt/test_mqtt_options.py::test_max_ack_pending_limits_messages_in_flight",
    "mqtt.max_pending": "tests/mqtt/test_mqtt_options.py::test_max_ack_pending_limits_messages_in_flight",
    "mqtt.max_inflight": "tests/mqtt/test_mqtt_options.py::test_max_ack_pending_limits_messages_in_flight",
    "mqtt.ack_wait": "tests/mqtt/test_mqtt_sessions.py::test_unacked_qos1_is_redelivered_as_dup_after_reconnect",
    "mqtt.ackwait": "tests/mqtt/test_mqtt_options.py::test_ack_wait_alias",
    "mqtt.consumer_memory_storage": "tests/mqtt/test_mqtt_options.py::test_consumer_and_stream_settings",
    "mqtt.consumer_inactive_threshold": "tests/mqtt/test_mqtt_options.py::test_consumer_and_stream_settings",
    "mqtt.consumer_auto_cleanup": "tests/mqtt/test_mqtt_options.py::test_consumer_and_stream_settings",
    "mqtt.stream_replicas": "tests/mqtt/test_mqtt_options.py::test_consumer_and_stream_settings",
    "mqtt.js_api_timeout": "tests/mqtt/test_mqtt_options.py::test_consumer_and_stream_settings",
    "mqtt.api_timeout": "tests/mqtt/test_mqtt_options.py::test_consumer_and_stream_settings",
    "mqtt.js_domain": "tests/mqtt/test_mqtt_options.py::test_js_domain",
    "mqtt.consumer_replicas": "tests/mqtt/test_mqtt_config.py::test_consumer_replicas_is_a_warning",
    "mqtt.tls": "tests/mqtt/test_mqtt_options.py::test_tls",
    "mqtt.reject_qos2_publish": "tests/mqtt/test_mqtt_qos2.py::test_qos2_options",
    "mqtt.downgrade_qos2_subscribe": "tests/mqtt/test_mqtt_qos2.py::test_qos2_options",
    # -- top level
    "accounts": _LIMITS,
    "allow_non_tls": _TLS + "test_allow_non_tls",
    "authorization": "tests/core/test_auth_e2e.py::test_bcrypt_user",
    "cluster": "tests/cluster/test_routes.py::test_pooled_and_pinned_routes",
    "debug": "tests/core/test_log_destinations.py::test_remote_syslog_lines",
    "default_sentinel": "tests/auth/test_default_sentinel.py::test_a_connect_without_a_jwt_is_the_sentinel",
    "default_js_domain": "tests/accounts/test_default_js_domain.py::test_a_leaf_without_jetstream_reaches_the_hubs",
    "proxy_protocol": "tests/core/test_proxy_protocol.py::test_proxy_protocol_headers_as_nats_server",
    "tls.allow_insecure_cipher_suites": "tests/core/test_tls_ciphers.py::test_an_allowed_insecure_suite_is_the_only_one_offered",
    "trusted": "tests/auth/test_trusted_keys.py::test_trusted_keys_alone_as_on_nats_server",
    "trusted_keys": "tests/auth/test_trusted_keys.py::test_trusted_keys_alone_as_on_nats_server",
    "http": _LAUNCHER,
    "http_port|monitor_port": _LAUNCHER,
    "https_port": _TLS + "test_https_monitoring",
    "jetstream": "tests/jetstream/test_streams.py::test_domain_and_non_js_accounts",
    "lame_duck_grace_period": "tests/core/test_lame_duck.py::test_log_lines_and_grace_period",
    "leafnodes|leaf": _DENY,
    "listen": _LAUNCHER,
    "logfile|log_file": _ROTATE,
    "logfile_size_limit|log_size_limit": _ROTATE,
    "logfile_max_num|log_max_num": _ROTATE,
    "mappings|maps": _TOP_MAPPINGS,
    "max_connections|max_conn": "tests/core/test_limits.py::test_max_connections",
    "max_control_line": "tests/core/test_protocol_raw.py::test_control_line_exceeded",
    "max_payload": "tests/core/test_limits.py::test_max_payload_from_config",
    "max_pending": "tests/core/test_limits.py::test_slow_consumer_cut_at_max_pending",
    "max_sub_tokens|max_subscription_tokens": "tests/core/test_limits.py::test_max_sub_tokens",
    "max_subscriptions|max_subs": "tests/core/test_limits.py::test_max_subscriptions",
    "no_auth_user": "tests/core/test_auth_e2e.py::test_no_auth_user",
    "operator|operators|root|roots|root_operator|root_operators":
        "tests/auth/test_operator_mode.py::test_operator_mode_matches_nats_server",
    "ping_interval": "tests/core/test_limits.py::test_stale_connection",
    "ping_max": "tests/core/test_limits.py::test_stale_connection",
    "remote_syslog": "tests/core/test_log_destinations.py::test_remote_syslog_lines",
    "resolver": _FULL_RESOLVER,
    "resolver_pinned_accounts": "tests/auth/test_pinned_accounts.py::test_only_pinned_accounts_log_in",
    "resolver_preload": "tests/auth/test_operator_mode.py::test_operator_mode_matches_nats_server",
    "resolver_tls": "tests/auth/test_resolver.py::test_https_url_resolver_with_resolver_tls",
    "server_name": "tests/leaf/test_leaf.py::test_system_account_ping_answered_by_both",
    "server_tags": "tests/cluster/test_placement.py::test_placement_by_tags_and_its_errors_match_nats_server",
    "system_account|system": "tests/accounts/test_system_e2e.py::test_user_sees_only_its_account",
    "tls": _TLS + "test_tls_pubsub",
    "trace": _ROTATE,                   # the trace lines are what fills the files it rotates
    "websocket|ws": "tests/core/test_websocket.py::test_nats_py_over_ws",
    "write_deadline": "tests/core/test_write_timeout.py::test_a_client_that_reads_nothing_is_closed_at_the_deadline",
    "write_timeout": "tests/core/test_write_timeout.py::test_a_slow_reader_stays_only_with_retry",
    # -- tests/conf/test_key_effects.py
    "server_metadata": "tests/conf/test_key_effects.py::test_server_metadata_under_http_base_path",
    "http_base_path": "tests/conf/test_key_effects.py::test_server_metadata_under_http_base_path",
    "no_system_account|no_system|no_sys_acc": "tests/conf/test_key_effects.py::test_no_system_account",
    "pidfile|pid_file": "tests/conf/test_key_effects.py::test_pidfile_in_the_config",
    "accounts.*.default_permissions": "tests/conf/test_key_effects.py::test_account_default_permissions",
    "authorization.user|username": "tests/conf/test_key_effects.py::test_user_password_and_token_in_the_file",
    "authorization.password|pass": "tests/conf/test_key_effects.py::test_user_password_and_token_in_the_file",
    "authorization.token": "tests/conf/test_key_effects.py::test_user_password_and_token_in_the_file",
    "store_dir|storedir": "tests/conf/test_key_effects.py::test_top_level_store_dir",
    "leafnodes.remotes[].disabled": "tests/conf/test_key_effects.py::test_a_disabled_leaf_remote_is_not_dialled",
    "tls.min_version": "tests/core/test_tls.py::test_min_version",
    "websocket.same_origin": "tests/core/test_websocket.py::test_same_origin_and_custom_headers",
    "websocket.headers": "tests/core/test_websocket.py::test_same_origin_and_custom_headers",
    "websocket.compress": "tests/core/test_websocket.py::test_compress_is_compression",
    # -- accounts
    "accounts.*.users": _LIMITS,
    "accounts.*.users[].user|username": _LIMITS,
    "accounts.*.users[].password|pass": _LIMITS,
    "accounts.*.users[].permissions|permission|authorization":
        "tests/accounts/test_imports_e2e.py::test_allow_responses_across_import",
    "accounts.*.limits": _LIMITS,
    "accounts.*.msg_trace|trace_dest": "tests/core/test_msgtrace.py::test_traceparent_is_traced_where_the_account_says",
    "accounts.*.msg_trace|trace_dest.dest": "tests/core/test_msgtrace.py::test_traceparent_is_traced_where_the_account_says",
    "accounts.*.msg_trace|trace_dest.sampling": "tests/core/test_msgtrace.py::test_traceparent_is_traced_where_the_account_says",
    "accounts.*.limits.max_connections|max_conn": _LIMITS,
    "accounts.*.limits.max_subscriptions|max_subs":
        "tests/accounts/test_accounts_e2e.py::test_account_max_subscriptions",
    "accounts.*.limits.max_payload|max_pay": "tests/accounts/test_accounts_e2e.py::test_account_max_payload",
    "accounts.*.limits.max_leafnodes|max_leafs": "tests/leaf/test_leaf_rules.py::test_account_max_leafnodes",
    "accounts.*.mappings|maps": "tests/accounts/test_accounts_e2e.py::test_weighted_account_mapping_remainder",
    "accounts.*.jetstream": "tests/jetstream/test_streams.py::test_domain_and_non_js_accounts",
    "accounts.*.exports": _IMPORTS,
    "accounts.*.exports[].stream": _IMPORTS,
    "accounts.*.exports[].service": _RESPONSES,
    "accounts.*.exports[].accounts": "tests/accounts/test_account_config_errors.py::test_bad_account_config",
    "accounts.*.exports[].response_type|response": _RESPONSES,
    "accounts.*.exports[].response_threshold|threshold|response_max_time|response_time":
        "tests/accounts/test_imports_e2e.py::test_response_threshold_expiry",
    "accounts.*.exports[].latency": _LATENCY,
    "accounts.*.exports[].allow_trace": "tests/core/test_msgtrace.py::test_traces_through_imports",
    "accounts.*.imports[].allow_trace": "tests/core/test_msgtrace.py::test_traces_through_imports",
    "accounts.*.exports[].latency.sampling": _LATENCY,
    "accounts.*.exports[].latency.subject": _LATENCY,
    "accounts.*.exports[].account_token_position": "tests/auth/test_token_positions.py::test_config_token_positions",
    "accounts.*.imports": _IMPORTS,
    "accounts.*.imports[].stream": _IMPORTS,
    "accounts.*.imports[].stream.account": _IMPORTS,
    "accounts.*.imports[].stream.subject": _IMPORTS,
    "accounts.*.imports[].service": _RESPONSES,
    "accounts.*.imports[].service.account": _RESPONSES,
    "accounts.*.imports[].service.subject": _RESPONSES,
    "accounts.*.imports[].prefix": _IMPORTS,
    "accounts.*.imports[].to": _IMPORTS,
    "accounts.*.imports[].share": _LATENCY,
    # -- authorization (users and permissions, keyed once for every place they appear)
    "authorization.users": "tests/core/test_auth_e2e.py::test_bcrypt_user",
    "authorization.users[].user|username": "tests/core/test_auth_e2e.py::test_bcrypt_user",
    "authorization.users[].password|pass": "tests/core/test_auth_e2e.py::test_bcrypt_user",
    "authorization.users[].nkey": "tests/core/test_auth_e2e.py::test_nkey_user",
    "authorization.users[].permissions|permission|authorization": _PUB_PERMS,
    "authorization.users[].permissions.publish|pub|import": _PUB_PERMS,
    "authorization.users[].permissions.publish.allow": _PUB_PERMS,
    "authorization.users[].permissions.publish.deny": _PUB_PERMS,
    "authorization.users[].permissions.subscribe|sub|export": _SUB_PERMS,
    "authorization.users[].permissions.subscribe.allow": _SUB_PERMS,
    "authorization.users[].permissions.subscribe.deny": _SUB_PERMS,
    "authorization.users[].permissions.allow_responses|publish_allow_responses":
        "tests/core/test_auth_e2e.py::test_allow_responses",
    "authorization.auth_callout|auth_hook": _CALLOUT,
    "authorization.auth_callout.issuer": _CALLOUT,
    "authorization.auth_callout.account|acc": _CALLOUT,
    "authorization.auth_callout.auth_users|users": _CALLOUT,
    "authorization.auth_callout.xkey|key": _CALLOUT,
    # -- cluster
    "cluster.name": "tests/cluster/test_route_errors.py::test_refused_routes",
    # -- gateway
    "gateway": _SC + "test_every_server_reaches_every_cluster",
    "gateway.name": _SC + "test_every_server_reaches_every_cluster",
    "gateway.port": _SC + "test_every_server_reaches_every_cluster",
    "gateway.gateways": _SC + "test_every_server_reaches_every_cluster",
    "gateway.gateways[].name": _GWE + "test_wrong_name_and_wrong_credentials",
    "gateway.gateways[].url": _GWE + "test_wrong_name_and_wrong_credentials",
    "gateway.gateways[].urls": _SC + "test_every_server_reaches_every_cluster",
    "gateway.authorization": _GWE + "test_gateway_credentials_let_the_right_peer_in",
    "gateway.authorization.user|username": _GWE + "test_gateway_credentials_let_the_right_peer_in",
    "gateway.authorization.password|pass": _GWE + "test_wrong_name_and_wrong_credentials",
    "gateway.authorization.token": _GWE + "test_bad_configs_get_nats_servers_errors",
    "gateway.authorization.users": _GWE + "test_bad_configs_get_nats_servers_errors",
    "gateway.authorization.auth_callout": _GWE + "test_bad_configs_get_nats_servers_errors",
    "gateway.reject_unknown|reject_unknown_cluster": _GWE + "test_reject_unknown_cluster",
    "gateway.write_deadline": "tests/gateways/test_gateway_write_deadline.py::"
                              "test_the_gateways_write_deadline_and_policy_as_nats_server",
    "gateway.write_timeout": "tests/gateways/test_gateway_write_deadline.py::"
                             "test_the_gateways_write_deadline_and_policy_as_nats_server",
    "gateway.tls": "tests/gateways/test_gateway_tls.py::test_foreign_certificates_and_plaintext_never_join",
    "gateway.gateways[].tls": "tests/gateways/test_gateway_tls.py::test_a_remote_entry_with_its_own_tls_is_dialed_with_it",
    "cluster.authorization": "tests/cluster/test_route_errors.py::test_refused_routes",
    "cluster.routes": "tests/cluster/test_routes.py::test_pooled_and_pinned_routes",
    "cluster.accounts": "tests/cluster/test_routes.py::test_pooled_and_pinned_routes",
    "cluster.port": _LAUNCHER,
    "cluster.listen": _LAUNCHER,
    "cluster.ping_interval": "tests/cluster/test_routes.py::test_partition_and_heal",
    "cluster.compression": "tests/cluster/test_route_compression.py::test_route_compression_with_nats_server",
    "cluster.compression.mode": "tests/cluster/test_route_compression.py::test_route_compression_with_nats_server",
    "cluster.compression.rtt_thresholds|thresholds|rtts|rtt":
        "tests/cluster/test_route_compression.py::test_route_compression_with_nats_server",
    "cluster.tls": "tests/cluster/test_route_tls.py::test_foreign_certificate_never_becomes_a_route",
    "cluster.permissions": "tests/cluster/test_route_permissions.py::test_route_permissions",
    # -- jetstream
    "jetstream.store_dir|store|storedir": _ENCRYPTED,
    "jetstream.domain": "tests/jetstream/test_streams.py::test_domain_and_non_js_accounts",
    "jetstream.key|ek|encryption_key": _ENCRYPTED,
    "jetstream.prev_key|prev_ek|prev_encryption_key": "tests/jetstream/test_encryption.py::test_key_rotation",
    "jetstream.cipher": "tests/jetstream/test_encryption.py::test_same_key_other_cipher_converts",
    "jetstream.max_file_store|max_file":
        "tests/cluster/test_placement.py::test_a_new_server_needs_room_for_max_bytes_as_on_nats_server",
    "jetstream.max_buffered_msgs": _INGEST,
    "jetstream.max_buffered_size": _INGEST,
    "jetstream.limits": _JS_LIMITS,
    "jetstream.limits.max_ack_pending": _JS_LIMITS,
    "jetstream.limits.max_request_batch": _JS_LIMITS,
    "jetstream.limits.duplicate_window": _JS_LIMITS,
    "jetstream.limits.max_ha_assets":
        "tests/cluster/test_placement.py::test_update_moves_the_stream_and_cancel_takes_it_back",
    "jetstream.limits.batch": _JS_LIMITS,
    "jetstream.limits.batch.max_msgs": _JS_LIMITS,
    "jetstream.limits.batch.max_inflight_per_stream": _JS_LIMITS,
    "jetstream.limits.batch.timeout": _JS_LIMITS,
    # -- leaf nodes
    "leafnodes.port": _DENY,
    "leafnodes.listen": _LAUNCHER,
    "leafnodes.tls": "tests/leaf/test_leaf_tls.py::test_leaf_over_tls",
    "leafnodes.compression": "tests/leaf/test_leaf_compression.py::test_leaf_compression_with_nats_server",
    "leafnodes.authorization": _LEAF_NKEY,
    "leafnodes.authorization.nkey": _LEAF_NKEY,
    "leafnodes.authorization.account": _LEAF_NKEY,
    "leafnodes.remotes": _DENY,
    "leafnodes.remotes[].url|urls": _DENY,
    "leafnodes.remotes[].account|local": "tests/leaf/test_leaf_permissions.py::test_leaf_user_permissions_hold",
    "leafnodes.remotes[].credentials|creds": "tests/leaf/test_leaf_credentials.py::test_operator_hub_creds_leaf",
    "leafnodes.remotes[].nkey|seed": _LEAF_NKEY,
    "leafnodes.remotes[].tls": "tests/leaf/test_leaf_tls.py::test_hub_requires_tls_plain_url_with_tls_block",
    "leafnodes.remotes[].deny_imports|deny_import": _DENY,
    "leafnodes.remotes[].deny_exports|deny_export": _DENY,
    "leafnodes.remotes[].compression": "tests/leaf/test_leaf_compression.py::test_leaf_compression_with_nats_server",
    "leafnodes.remotes[].first_info_timeout": "tests/leaf/test_leaf_discovery.py::test_first_info_timeout",
    "leafnodes.remotes[].proxy": _PROXY + "test_a_remote_through_an_http_proxy_as_nats_server",
    "leafnodes.remotes[].proxy.url": _PROXY + "test_a_remote_through_an_http_proxy_as_nats_server",
    "leafnodes.remotes[].proxy.username": _PROXY + "test_a_remote_through_an_http_proxy_as_nats_server",
    "leafnodes.remotes[].proxy.password": _PROXY + "test_a_remote_through_an_http_proxy_as_nats_server",
    "leafnodes.remotes[].proxy.timeout": _PROXY + "test_a_proxy_that_does_not_answer_times_out_as_nats_server",
    "leafnodes.isolate_leafnode_interest|isolate": _ISO,
    "leafnodes.remotes[].isolate_leafnode_interest|isolate": _ISO,
    "leafnodes.remotes[].request_isolation": _ISO,
    "leafnodes.dial_timeout": "tests/leaf/test_leaf_dial_timeout.py::"
                              "test_a_remote_gives_up_at_its_dial_timeout_as_nats_server",
    "leafnodes.remotes[].dial_timeout": "tests/leaf/test_leaf_dial_timeout.py::"
                                        "test_a_remote_gives_up_at_its_dial_timeout_as_nats_server",
    "leafnodes.remotes[].ignore_discovered_servers":
        "tests/leaf/test_leaf_discovery.py::test_a_remote_fails_over_to_a_discovered_hub_server",
    # -- mappings (top level and accounts), resolver
    "mappings.*.destination|dest": _TOP_MAPPINGS,
    "mappings.*.weight": _TOP_MAPPINGS,
    "mappings.*.cluster": "tests/accounts/test_mappings_e2e.py::test_mappings_match_nats_server",
    "resolver.type": _FULL_RESOLVER,
    "resolver.dir": _FULL_RESOLVER,
    "resolver.allow_delete": _FULL_RESOLVER,
    # -- tls blocks (keyed once, under the client port's `tls`)
    "tls.cert_file": _TLS + "test_tls_pubsub",
    "tls.key_file": _TLS + "test_tls_pubsub",
    "tls.ca_file": _TLS + "test_client_certificates_required",
    "tls.verify": _TLS + "test_client_certificates_required",
    "tls.verify_and_map": _TLS + "test_verify_and_map",
    "tls.handshake_first": _TLS + "test_handshake_first",
    "tls.pinned_certs": _TLS + "test_pinned_certs",
    "tls.certs|certificates": _TLS + "test_certificates_chosen_by_server_name",
    "tls.connection_rate_limit": _TLS + "test_connection_rate_limit",
    "tls.insecure": "tests/cluster/test_route_tls.py::test_insecure_warns_and_skips_the_host_check",
    "tls.verify_cert_and_check_known_urls": "tests/cluster/test_route_tls.py::test_verify_cert_and_check_known_urls",
    # -- websocket
    "websocket.port": "tests/core/test_websocket.py::test_nats_py_over_ws",
    "websocket.listen": _LAUNCHER,
    "websocket.no_tls": "tests/core/test_websocket.py::test_nats_py_over_ws",
    "websocket.tls": "tests/core/test_websocket.py::test_nats_py_over_wss",
    "websocket.allowed_origins": "tests/core/test_websocket.py::test_refused_upgrades",
    "websocket.origins": "tests/core/test_websocket.py::test_same_origin_and_custom_headers",
    "websocket.compression": "tests/core/test_websocket.py::test_compression_both_ways",
    "websocket.authorization": _WS_AUTH,
    "websocket.user_cookie": _WS_AUTH,
    "websocket.pass_cookie": _WS_AUTH,
    "account_resolver|accounts_resolver": "tests/auth/test_resolver.py::test_resolver_aliases",
    "tls.cert_store": "tests/conf/test_unsupported.py::test_nats_server_errors_come_first",
    "no_fast_producer_stall": "tests/core/test_slow_consumers.py::test_no_fast_producer_stall",
    "logtime": "tests/core/test_config_effects.py::test_logtime_false_drops_the_time_stamp",
    "logtime_utc": "tests/core/test_config_effects.py::test_logtime_utc",
    "max_closed_clients": "tests/core/test_config_effects.py::test_max_closed_clients",
    "no_header_support": "tests/core/test_config_effects.py::test_no_header_support",
    "max_traced_msg_len": "tests/core/test_config_effects.py::test_max_traced_msg_len",
    "ports_file_dir": "tests/core/test_ports_file.py::test_ports_file",
    "tls.ocsp_peer": "tests/core/test_ocsp_peer.py::test_ocsp_peer",
    "trace_headers": "tests/core/test_config_effects.py::test_trace_headers",
    "trace_verbose": "tests/core/test_config_effects.py::test_trace_verbose_traces_the_system_client",
    "connect_error_reports": "tests/leaf/test_leaf_discovery.py::test_connect_error_reports",
    "leafnodes.min_version|minimum_version": "tests/leaf/test_leaf_admission.py::test_leafnodes_min_version",
    "disable_sublist_cache|no_sublist_cache": "tests/core/test_config_effects.py::test_disable_sublist_cache",
}

_PARSED = "parsed, no effect test"
_STORED = "stored in Options.extra, not read by natsd"
_HARNESS = "the test harness passes -a/-p, which win over the file"

# key path (aliases with `|`) -> why there is no evidence yet
NO_EVIDENCE_YET: dict[str, str] = {
    "mqtt.handshake_timeout": "a websocket key: the listener-block reader checks it for websocket only, "
                              "so in mqtt {} it is an unknown field, as on nats-server",
    "websocket.consumer_replicas": "an mqtt key: the listener-block reader checks it for mqtt only, "
                                   "so in websocket {} it is an unknown field, as on nats-server",
    # -- top level
    "client_advertise": "parsed (test_load); no test looks at the connect_urls it changes",
    "reconnect_error_reports": _PARSED,
    "feature_flags": "the block itself; a flag other than nats-server 2.15's default is refused",
    "host|net": _HARNESS + "; -a itself is tested (test_ipv6_loopback)",
    "port": _HARNESS + "; test_listener_lines_are_nats_servers masks port numbers",
    "https": "parsed; only https_port is tested",
    "lame_duck_duration": "tests set 30s, but nothing they check tells it from the 2m default",
    "prof_port": "effect shown only for the --profile flag (tests/monitor/test_profiling.py)",
    "syslog": "effect shown only for the -s flag (test_local_syslog_missing_is_fatal)",
    # -- accounts
    "accounts.*.nkey": _PARSED,
    "accounts.*.users[].nkey": "tested only with a nats-server hub (test_nkey_seed_remote)",
    "accounts.*.users[].allowed_connection_types|connection_types|clients":
        "tested in-process only (test_authenticator::test_allowed_connection_types), not from a config",
    "accounts.*.jetstream.enabled|enable|disabled|disable": "parsed; tests use `jetstream: enabled`, not the map's keys",
    "accounts.*.jetstream.max_memory|max_mem|mem|memory|max_store|max_file|max_disk|store|disk|max_streams|"
    "streams|max_consumers|consumers|max_bytes_required|max_bytes|max_stream_bytes|mem_max_stream_bytes|"
    "memory_max_stream_bytes|disk_max_stream_bytes|store_max_stream_bytes|max_ack_pending":
        "account JetStream limits: parsed, no config test of any of them",
    # -- authorization
    "authorization.timeout": "tests set 0.5s/1s, but none checks how long it takes (the 2s default passes them)",
    "authorization.default_permissions|default_permission|permissions":
        "tested only against nats-server (test_reference_texts::test_default_permissions_scope)",
    "authorization.users[].allowed_connection_types|connection_types|clients":
        "tested in-process only (test_authenticator::test_allowed_connection_types), not from a config",
    "authorization.users[].permissions.allow_responses.max|max_msgs|max_messages|max_responses":
        "only `allow_responses: true` (one response) is tested",
    "authorization.users[].permissions.allow_responses.expires|expiration|ttl":
        "only `allow_responses: true` is tested",
    "authorization.auth_callout.allowed_accounts": "only its config check is tested (test_auth_callout_config_errors)",
    # -- cluster
    "cluster.host|net": _PARSED,
    "gateway.host|net": _PARSED,
    "gateway.listen": _PARSED,
    "gateway.advertise": "parsed; /gatewayz and the INFO show it, no test looks",
    "gateway.connect_retries": _PARSED,
    "gateway.connect_backoff": _PARSED,
    "gateway.authorization.timeout": _PARSED,
    "cluster.advertise|cluster_advertise": "test_partitioned_leader_acks_nothing... sets it so gossip makes "
                                           "no route around its proxies, but checks nothing that needs it",
    "cluster.no_advertise": _PARSED,
    "cluster.connect_retries": _PARSED,
    "cluster.connect_backoff": _PARSED,
    "cluster.pool_size": "test_partition_and_heal sets 1 or 3 but checks nothing that depends on it",
    "cluster.ping_max": "tests set 2, its default",
    "cluster.write_deadline": _PARSED,
    "cluster.write_timeout": _PARSED,
    # -- jetstream
    "jetstream.strict": _PARSED,
    "jetstream.enabled|enable": _PARSED,
    "jetstream.sync|sync_interval": _PARSED,
    "jetstream.max_memory_store|max_mem_store|max_mem": "only natsd's refusal to reload it is tested",
    "jetstream.unique_tag": "test_placement_by_tags... sets it, but every server there has its own az tag",
    "jetstream.limits.batch.max_inflight_total": _PARSED,
    # -- leaf nodes
    "leafnodes.host|net": _PARSED,
    "leafnodes.advertise|leafnode_advertise": _PARSED,
    "leafnodes.no_advertise": "only its reload refusal is tested (test_reload_rules)",
    "leafnodes.reconnect|reconnect_delay|reconnect_interval":
        "tests set 200ms, but nothing they check tells it from the 1s default",
    "leafnodes.write_deadline": _PARSED,
    "leafnodes.write_timeout": _PARSED,
    "leafnodes.authorization.user|username": _PARSED,
    "leafnodes.authorization.password|pass": _PARSED,
    "leafnodes.authorization.timeout": _PARSED,
    "leafnodes.authorization.users": _PARSED,
    "leafnodes.authorization.users[].user|username": _PARSED,
    "leafnodes.authorization.users[].password|pass": _PARSED,
    "leafnodes.authorization.users[].account": _PARSED,
    "leafnodes.remotes[].hub": _PARSED,
    "leafnodes.remotes[].no_randomize|dont_randomize": _PARSED,
    "leafnodes.compression.mode|rtt_thresholds|thresholds|rtts|rtt":
        "the map form is tested on routes (test_route_compression.py); leaf links read it with the same parser",
    "leafnodes.remotes[].compression.mode|rtt_thresholds|thresholds|rtts|rtt":
        "the map form is tested on routes (test_route_compression.py); leaf links read it with the same parser",
    "leafnodes.remotes[].ws_compression|ws_compress|websocket_compression|websocket_compress":
        "test_leaf_over_ws_compressed_unmasked sets ws_compression but checks only that messages cross",
    "leafnodes.remotes[].ws_no_masking|websocket_no_masking":
        "test_leaf_over_ws_compressed_unmasked sets ws_no_masking but checks only that messages cross",
    # -- resolver
    "resolver.timeout": "test_full_resolver_matches_nats_server sets it; no test checks a fetch timing out",
    "resolver.hard_delete": "parsed (test_resolver_configs_load), no effect test",
    "resolver.limit": "parsed (test_resolver_configs_load), no effect test",
    "resolver.ttl": "parsed (test_resolver_configs_load), no effect test",
    "resolver.interval": "parsed (test_resolver_configs_load), no effect test",
    # -- tls blocks
    "tls.timeout": "test_stalled_handshake_times_out accepts anything under 3s, which the 2s default "
                   "meets; /varz reports it (test_tls_and_auth_figures_in_varz)",
    "tls.first": "read by natsd/net/tls.py as handshake_first, no test uses this name",
    "tls.immediate": "read by natsd/net/tls.py as handshake_first, no test uses this name",
    "tls.cert_match_by": "only with cert_store (Windows), refused here as by nats-server: no effect on either",
    "tls.cert_match": "only with cert_store (Windows), refused here as by nats-server: no effect on either",
    "tls.ca_certs_match": "only with cert_store (Windows), refused here as by nats-server: no effect on either",
    "tls.cert_match_skip_invalid": "only with cert_store (Windows), refused here as by nats-server: no effect on either",
    # -- websocket
    "websocket.host|net": _PARSED,
    "websocket.advertise": _PARSED,
    "websocket.allowed_origin|allow_origins|allow_origin|origin": "read by natsd/net/websocket.py as allowed_origins; no test uses these names (`origins` has one)",
    "websocket.authentication": "read by natsd/net/websocket.py as authorization; no test uses this name",
    "websocket.handshake_timeout": "test_handshake_timeout sets 500ms but accepts anything under 3s, "
                                   "which the 2s default meets",
    "websocket.jwt_cookie": _PARSED,
    "websocket.token_cookie": _PARSED,
    "websocket.no_auth_user": _PARSED,
    "websocket.ping_interval": _PARSED,
}


# -- the tests -------------------------------------------------------------------------------

def test_the_loader_code_is_read():
    keys, problems, used = section_keys()
    assert not problems, "\n".join(problems)
    assert not set(BLOCKS) - used, f"BLOCKS entries matching no code: {sorted(set(BLOCKS) - used)}"
    # a few keys of each kind of place, so a reader that finds nothing cannot pass
    for k in ("leafnodes.remotes[].first_info_timeout", "leafnodes.authorization.users[].password",
              "cluster.name", "gateway.port", "tls.verify", "tls.cert_file", "websocket.compression",
              "mqtt.ack_wait", "jetstream.limits.batch.timeout", "accounts.*.limits.max_conn",
              "accounts.*.imports[].service.subject", "authorization.token", "resolver.dir",
              "authorization.users[].permissions.publish.deny"):
        assert k in keys, k
    assert {"write_deadline", "leaf", "max_subscription_tokens"} <= set(top_level_keys())


def test_every_key_is_shown_refused_or_listed():
    evidence, waiting = _table_paths(EVIDENCE), _table_paths(NO_EVIDENCE_YET)
    missing = sorted(k for k in known_keys() if k not in evidence and k not in waiting and not refused(k))
    assert not missing, ("keys with no test of their effect (add them to EVIDENCE, or to "
                         "NO_EVIDENCE_YET with a reason):\n" + "\n".join(missing))


def test_tables_name_known_keys():
    known = known_keys()
    for name, table in (("EVIDENCE", EVIDENCE), ("NO_EVIDENCE_YET", NO_EVIDENCE_YET)):
        stale = sorted(p for p in _table_paths(table) if p not in known)
        assert not stale, f"{name} names keys the loader does not know: {stale}"


def test_evidence_names_real_tests():
    bad = sorted(f"{k}: {ref}" for k, ref in EVIDENCE.items() if not _test_exists(ref))
    assert not bad, "EVIDENCE points at tests that do not exist:\n" + "\n".join(bad)


def test_evidence_groups_only_aliases():
    """Names sharing one EVIDENCE entry must be one key to the loader: one test cannot show
    two keys that are read apart."""
    known = known_keys()
    bad = []
    for entry in EVIDENCE:
        by_block: dict[str, list[str]] = {}
        for p in expand(entry):
            by_block.setdefault(p.rpartition(".")[0], []).append(p)
        for paths in by_block.values():
            if len(paths) > 1 and not set.intersection(*(known.get(p, set()) for p in paths)):
                bad.append(entry)
    assert not bad, "EVIDENCE entries grouping names that are not aliases:\n" + "\n".join(bad)


def test_no_evidence_list_only_shrinks():
    evidence = _table_paths(EVIDENCE)
    done = sorted(f"{p} (refused)" if refused(p) else f"{p} (EVIDENCE: {evidence[p]})"
                  for p in _table_paths(NO_EVIDENCE_YET) if refused(p) or p in evidence)
    assert not done, "NO_EVIDENCE_YET lists keys that are covered now; delete them:\n" + "\n".join(done)
    assert all(reason.strip() for reason in NO_EVIDENCE_YET.values())


def test_refused_keys_have_no_evidence_entry():
    """A refused key needs no test of its effect; an EVIDENCE entry for it is stale."""
    stale = sorted(p for p in _table_paths(EVIDENCE) if refused(p))
    assert not stale, f"EVIDENCE lists refused keys: {stale}"
