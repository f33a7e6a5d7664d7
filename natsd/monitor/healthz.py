"""`/healthz` and `$SYS.REQ.SERVER.PING.HEALTHZ`: nats-server's health checks and answers.

- `js-server-only`: the server serves (nothing of JetStream is checked).
- `js-enabled-only` (and the deprecated `js-enabled`): on nats-server, JetStream is enabled.
  natsd goes further here, as its replicated JetStream asks: the meta group and the
  replicated streams on this server must have a leader and be current, and with `details`
  each problem is listed, down to which members are unreachable since when and what to do.
- no flag (and `js-meta-only`, the meta group alone): those checks, then the asset asked
  for: `account`, `stream` (needs `account`: 400 otherwise) and `consumer` (needs `stream`)
  must be here, or 404.

The answer: `{"status": "ok"}`; on a failure without `details`, `{"status": "unavailable" (or
"error" for a bad request), "error": the first problem}`; with `details`,
`{"status": "error", "errors": [{"type", "account", "stream", "consumer", "error"}]}`. The
HTTP status carries the code; a `$SYS` answer has it as `status_code` (natsd/monitor/endpoints.py).
"""

BAD_REQUEST, NOT_FOUND, UNAVAILABLE = 400, 404, 503


def _flag(query, name):
    return query.get(name, "").lower() in ("true", "1")


def healthz(server, query):
    """-> (HTTP status, HealthStatus without its status_code)."""
    details = _flag(query, "details")
    account, stream, consumer = (query.get(k, "") for k in ("account", "stream", "consumer"))
    if stream and not account:
        return _failed(details, BAD_REQUEST, [{"type": "BAD_REQUEST", "error":
                       '"account" must not be empty when checking stream health'}])
    if consumer and not stream:
        return _failed(details, BAD_REQUEST, [{"type": "BAD_REQUEST", "error":
                       '"stream" must not be empty when checking consumer health'}])
    if server.shutting_down:
        return _failed(details, UNAVAILABLE, [{"type": "CONNECTION", "error": "server is shutting down"}])
    js = getattr(server, "jetstream", None)
    if _flag(query, "js-server-only") or js is None:
        return 200, {"status": "ok"}
    errors = server.jetstream_health_errors(query)
    if errors:
        return _failed(details, UNAVAILABLE, errors)
    if not (_flag(query, "js-enabled-only") or _flag(query, "js-enabled") or _flag(query, "js-meta-only")):
        missing = _missing_asset(js, account, stream, consumer)
        if missing:
            return _failed(details, NOT_FOUND, [missing])
    return 200, {"status": "ok"}


def _failed(details, code, errors):
    if details:
        return code, {"status": "error", "errors": errors}
    return code, {"status": "error" if code == BAD_REQUEST else "unavailable", "error": errors[0]["error"]}


def _missing_asset(js, account, stream, consumer):
    """The account, stream or consumer asked about that this server does not have (None when
    all are here or none was asked about)."""
    if not account:
        return None
    jsa = js.account(account)
    if jsa is None or not (jsa.streams or js.assigned_streams(account)):
        return {"type": "ACCOUNT", "account": account,
                "error": 'JetStream account "%s" not found' % account}
    if not stream:
        return None
    st = jsa.streams.get(stream)
    if st is None:
        return {"type": "STREAM", "account": account, "stream": stream,
                "error": 'JetStream stream "%s" not found on account "%s"' % (stream, account)}
    if consumer and consumer not in st.consumer_names():
        return {"type": "CONSUMER", "account": account, "stream": stream, "consumer": consumer,
                "error": 'JetStream consumer "%s" not found for stream "%s" on account "%s"'
                         % (consumer, stream, account)}
    return None
