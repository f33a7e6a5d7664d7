"""The table of monitoring endpoints, shared by the HTTP monitor and `$SYS.REQ.*` requests.

Each `Endpoint` couples a path with three functions: `from_query(query: dict[str, str])` and
`from_json(body: dict)` build the same options object (HTTP `?subs=1` and `$SYS` body
`{"subscriptions": true}`), and `handler(server, options)` produces the answer (a dict, a
`(status, dict)` pair, or `(status, bytes, content type)` for /metrics). Malformed options
raise `params.OptionsError` (an `HttpError` with status 400 and nats-server's text);
`jsz.SkipResponse` (a subclass) means "filtered: a $SYS responder sends nothing".
An endpoint may answer HTTP with its own `http_handler` (/raftz, /debug/vars), account-scoped
`$SYS` requests with an `account_handler` (ACCOUNT.<acc>.JSZ), or have no HTTP path at all
(PROFILEZ).

For `$SYS` requests use `sys_handler(name)` -> `fn(server, body, account=None)`: it decodes
the JSON body, scopes the options to `account` for account requests
(`$SYS.REQ.ACCOUNT.<acc>.CONNZ|SUBSZ|LEAFZ|JSZ|STATZ`), and returns the `data` dict.
"""
from dataclasses import dataclass
from typing import Callable, Optional

from natsd.monitor import (accountz, connz, expvarz, healthz, ipqueuesz, jsz, leafz, metrics,
                           profilez, raftz, routez, stacksz, subsz, varz)


def _query_passthrough(q):
    return dict(q)


def _json_as_query(body):
    """Endpoints that still read a query dict (varz, healthz): JSON options -> query strings."""
    out = {}
    for k, v in (body or {}).items():
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif v is not None:
            out[k] = str(v)
    return out


def _healthz(server, q):
    return healthz.healthz(server, q)


def _varz(server, q):
    return varz.varz(server, q)


@dataclass(frozen=True)
class Endpoint:
    name: str                           # lower-case; $SYS name is name.upper()
    path: Optional[str]                 # None: a $SYS service only
    from_query: Callable
    from_json: Callable
    handler: Callable                   # handler(server, options)
    account_field: Optional[str] = None  # option set to the account for account-scoped $SYS
    http_handler: Optional[Callable] = None     # HTTP answer, when it differs from handler's
    account_handler: Optional[Callable] = None  # account-scoped $SYS answer, when it differs

    def http(self, server, query):
        return (self.http_handler or self.handler)(server, self.from_query(query))


def _scope_accstatz(opts, account):
    opts.accounts = [account]
    opts.include_unused = True


ENDPOINTS = [
    Endpoint("varz", "/varz", _query_passthrough, _json_as_query, _varz),
    Endpoint("connz", "/connz", connz.options_from_query, connz.options_from_json,
             connz.handler, "account"),
    Endpoint("routez", "/routez", routez.options_from_query, routez.options_from_json,
             routez.handler),
    Endpoint("gatewayz", "/gatewayz", routez.gatewayz_options_from_query,
             routez.gatewayz_options_from_json, routez.gatewayz_handler),
    Endpoint("leafz", "/leafz", leafz.options_from_query, leafz.options_from_json,
             leafz.handler, "account"),
    Endpoint("subsz", "/subsz", subsz.options_from_query, subsz.options_from_json,
             subsz.handler, "account"),
    Endpoint("accountz", "/accountz", accountz.options_from_query, accountz.options_from_json,
             accountz.handler, "account"),
    Endpoint("accstatz", "/accstatz", accountz.accstatz_options_from_query,
             accountz.accstatz_options_from_json, accountz.accstatz_handler, "accounts"),
    Endpoint("jsz", "/jsz", jsz.options_from_query, jsz.options_from_json, jsz.handler,
             "account", account_handler=jsz.account_handler),
    Endpoint("healthz", "/healthz", _query_passthrough, _json_as_query, _healthz),
    Endpoint("metrics", "/metrics", metrics.options_from_query, metrics.options_from_json,
             metrics.handler),
    Endpoint("expvarz", "/debug/vars", expvarz.options_from_query, expvarz.options_from_json,
             expvarz.handler, http_handler=expvarz.http_handler),
    Endpoint("stacksz", "/stacksz", stacksz.options_from_query, stacksz.options_from_json,
             stacksz.handler),
    Endpoint("ipqueuesz", "/ipqueuesz", ipqueuesz.options_from_query,
             ipqueuesz.options_from_json, ipqueuesz.handler),
    Endpoint("raftz", "/raftz", raftz.options_from_query, raftz.options_from_json,
             raftz.handler, http_handler=raftz.http_handler),
    Endpoint("profilez", None, profilez.options_from_query, profilez.options_from_json,
             profilez.handler),
]
BY_NAME = {e.name: e for e in ENDPOINTS}
# nats-server also serves these paths as aliases
ALIASES = {"/subscriptionsz": "subsz"}


def get(name):
    return BY_NAME.get(name.lower())


def sys_handler(name):
    """fn(server, body, account=None) -> data dict for `$SYS.REQ.*.<NAME>`, or None if unknown."""
    ep = get(name)
    if ep is None:
        return None

    def run(server, body, account=None):
        opts = ep.from_json(body if body is not None else {})
        handler = ep.handler
        if account is not None and ep.account_field:
            acc_name = getattr(account, "name", account)
            if ep.name == "accstatz":
                _scope_accstatz(opts, acc_name)
            else:
                setattr(opts, ep.account_field, acc_name)
            handler = ep.account_handler or handler
        result = handler(server, opts)
        if isinstance(result, tuple):
            code, result = result
            if ep.name == "healthz":
                result = dict(result, status_code=code)     # nats-server's healthz() sets it
        return result
    return run


def routes(server):
    expvarz.install()
    table = {e.path: (lambda q, e=e: e.http(server, q)) for e in ENDPOINTS if e.path}
    for alias, name in ALIASES.items():
        table[alias] = table[BY_NAME[name].path]
    listed = sorted(p for p in table if p not in ALIASES)
    table["/"] = lambda q: varz.landing_page(server, listed)
    return table
