"""The services every account reaches in the system account, as `/accountz` lists them.

nats-server wires the system account's request services to the other accounts with service
exports and imports (events.go addSystemAccountExports / registerSystemImports, jetstream.go
setupJetStreamExports / enableAllJetStreamServiceImportsAndMappings) and shows them in the
account detail. natsd answers the same subjects in each account with internal subscriptions
(natsd/system/services.py, the JetStream API per account), with the same effect; these functions
describe that wiring in nats-server's terms so the account details read the same.
"""


def _import(subject, sys_name, local, share):
    return {"subject": subject, "account": sys_name, "to": local, "local_subject": local,
            "type": "service", "invalid": False, "share": share, "tracking": False}


def system_exports(server, acc):
    """The exports of the system account (none for any other account)."""
    sys_acc = server.accounts.system
    if sys_acc is None or acc is not sys_acc or getattr(server, "system", None) is None:
        return []
    out = [{"subject": "$SYS.REQ.ACCOUNT.*.CONNZ", "type": "service", "response_type": "Streamed"},
           {"subject": "$SYS.REQ.ACCOUNT.*.STATZ", "type": "service", "response_type": "Streamed"},
           {"subject": "$SYS.DEBUG.SUBSCRIBERS", "type": "service", "response_type": "Singleton"},
           {"subject": "$SYS.REQ.USER.*.INFO", "type": "service", "response_type": "Singleton"}]
    if server.jetstream_enabled():
        out.append({"subject": "$JS.API.>", "type": "service", "response_type": "Singleton"})
    return out


def system_imports(server, acc):
    """The service imports an account has from the system account."""
    sys_acc = server.accounts.system
    if sys_acc is None or getattr(server, "system", None) is None:
        return []
    s, name = sys_acc.name, acc.name
    out = []
    if acc is not sys_acc:
        out += [_import("$SYS.REQ.ACCOUNT.%s.CONNZ" % name, s, "$SYS.REQ.ACCOUNT.PING.CONNZ", False),
                _import("$SYS.REQ.ACCOUNT.%s.CONNZ" % name, s, "$SYS.REQ.SERVER.PING.CONNZ", False),
                _import("$SYS.REQ.ACCOUNT.%s.STATZ" % name, s, "$SYS.REQ.ACCOUNT.PING.STATZ", False)]
    out.append(_import("$SYS.REQ.USER.%s.INFO" % name, s, "$SYS.REQ.USER.INFO", True))
    js = getattr(server, "jetstream", None)
    if acc is not sys_acc and js is not None and js.account(acc.name) is not None:
        out.append(_import("$JS.API.>", s, "$JS.API.>", True))
    return out
