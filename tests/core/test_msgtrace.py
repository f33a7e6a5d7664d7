"""Message tracing (`Nats-Trace-Dest`, `Nats-Trace-Only`): the trace event a server publishes
for a client's message, its `in`/`sm`/`se`/`si`/`eg` events with nats-server's fields and
errors, trace-only messages that reach no one, and the bad inputs (a destination that is no
subject, one the publisher may not publish to). Each scenario runs on natsd and nats-server
alike and the events are compared with the times, connection ids and server left out."""
import base64
import json
import re

import pytest

from tests.support.jwtmint import Mint
from tests.support.rawclient import RawClient
from tests.support.waiting import poll
from tools.serverproc import free_port

MSG_RE = re.compile(rb"(H?MSG) ([^\r]+)\r\n")


def _hdr(*pairs):
    return b"NATS/1.0\r\n" + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in pairs) + b"\r\n"


def _hpub(c, subject, hdr, payload=b"hello"):
    c.send(b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, len(hdr), len(hdr) + len(payload), hdr, payload))


def _messages(raw):
    """(subject, header block, payload) of each MSG/HMSG in `raw`."""
    out, i = [], 0
    while True:
        m = MSG_RE.search(raw, i)
        if not m:
            return out
        args = m.group(2).split(b" ")
        total = int(args[-1])
        hlen = int(args[-2]) if m.group(1) == b"HMSG" else 0
        body = raw[m.end():m.end() + total]
        out.append((args[0], body[:hlen], body[hlen:]))
        i = m.end() + total + 2


def _events_of(tracer, n=1):
    """The `n` trace events the tracer has received: each as its JSON, with the server part
    checked for its fields and then dropped, times and connection ids dropped."""
    got = []

    def arrived():
        # (an empty message is a test's probe of the links, not an event)
        got.extend(json.loads(p) for _, _, p in _messages(tracer.sync()) if p)
        return len(got) >= n
    assert poll(arrived, timeout=5)
    for ev in got:
        assert {"name", "id", "ver", "seq", "time"} <= set(ev.pop("server"))
        for e in ev["events"]:
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", e.pop("ts"))
            if "cid" in e:
                assert e.pop("cid") > 0
        ev["events"] = _egress_runs_sorted(ev["events"])
    return got


def _egress_runs_sorted(events):
    """Each run of egress events in a fixed order: the order of a match's subscribers is each
    server's own."""
    out, run = [], []
    for e in events + [None]:
        if e is not None and e["type"] == "eg":
            run.append(e)
            continue
        out.extend(sorted(run, key=lambda x: json.dumps(x, sort_keys=True)))
        run = []
        if e is not None:
            out.append(e)
    return out


def _client(port, name, **opts):
    return RawClient(port).connect(name=name, **opts)


def _traced_between(pub_port, sub_port, only, interest_arrived):
    """A traced `foo` published on one server, its subscriber and the trace destination `tr`
    on the other; `interest_arrived()` waits until each server knows the other's interest.
    -> (the two events, by the kind of their ingress; what the subscriber got)."""
    with _client(sub_port, "subber") as sub, _client(pub_port, "tracer") as tracer, \
            _client(pub_port, "pubber") as pub:
        sub.send(b"SUB foo 1\r\n")
        sub.sync()
        tracer.send(b"SUB tr 1\r\n")
        tracer.sync()
        interest_arrived()
        pairs = [("Nats-Trace-Dest", "tr")] + ([("Nats-Trace-Only", "true")] if only else [])
        _hpub(pub, b"foo", _hdr(*pairs))
        events = _events_of(tracer, 2)
        got = _messages(sub.sync())
    return sorted(events, key=lambda e: e["events"][0]["kind"]), [m[1] for m in got]


def test_a_traced_message_and_a_trace_only_one(any_server, tmp_path):
    conf = tmp_path / "t.conf"
    conf.write_text('mappings { "m.a": "m.b" }\n')
    srv = any_server("-c", str(conf))
    with _client(srv.port, "tracer") as tracer, _client(srv.port, "subber") as sub, \
            _client(srv.port, "pubber", echo=False) as pub:
        tracer.send(b"SUB trace.dest 1\r\n")
        tracer.sync()
        sub.send(b"SUB foo 1\r\nSUB foo q 2\r\nSUB m.b 3\r\n")
        sub.sync()
        pub.send(b"SUB foo 9\r\n")              # its own: no echo
        _hpub(pub, b"foo", _hdr(("Nats-Trace-Dest", "trace.dest"), ("X", "y")))
        pub.sync()
        assert [m[0] for m in _messages(sub.sync())] == [b"foo", b"foo"]
        assert _events_of(tracer) == [{
            "request": {"header": {"Nats-Trace-Dest": ["trace.dest"], "X": ["y"]}, "msgsize": 52},
            "events": [
                {"type": "in", "kind": 0, "name": "pubber", "acc": "$G", "subj": "foo"},
                {"type": "eg", "kind": 0, "name": "pubber", "sub": "foo",
                 "error": "Not delivered because of no echo"},
                {"type": "eg", "kind": 0, "name": "subber", "sub": "foo", "queue": "q"},
                {"type": "eg", "kind": 0, "name": "subber", "sub": "foo"}]}]
        # trace only, through a mapping: traced, delivered to nobody
        _hpub(pub, b"m.a", _hdr(("Nats-Trace-Dest", "trace.dest"), ("Nats-Trace-Only", "true")))
        pub.sync()
        assert _events_of(tracer) == [{
            "request": {"header": {"Nats-Trace-Dest": ["trace.dest"], "Nats-Trace-Only": ["true"]},
                        "msgsize": 69},
            "events": [
                {"type": "in", "kind": 0, "name": "pubber", "acc": "$G", "subj": "m.a"},
                {"type": "sm", "to": "m.b"},
                {"type": "eg", "kind": 0, "name": "subber", "sub": "m.b"}]}]
        assert _messages(sub.sync()) == []


ACCOUNTS = """
accounts {
  SVC {
    users [{user: svc, password: p}]
    exports [{service: "svc.traced", allow_trace: true}, {service: "svc.plain"}, {stream: "ev.>"}]
  }
  APP {
    users [{user: app, password: p}]
    imports [
      {service: {account: SVC, subject: "svc.traced"}}
      {service: {account: SVC, subject: "svc.plain"}}
      {stream: {account: SVC, subject: "ev.>"}, prefix: "in", allow_trace: true}
    ]
  }
}
"""


def test_traces_through_imports(any_server, tmp_path):
    """A service import that allows tracing goes on traced (`si`, then the service's egress
    with its account); one that does not stops a trace-only message and lets any other go on
    untraced, its header rewritten; a stream import (`se`) into the importer."""
    conf = tmp_path / "a.conf"
    conf.write_text(ACCOUNTS)
    srv = any_server("-c", str(conf))
    with _client(srv.port, "tracer", user="app", **{"pass": "p"}) as tracer, \
            _client(srv.port, "service", user="svc", **{"pass": "p"}) as svc, \
            _client(srv.port, "app", user="app", **{"pass": "p"}) as app:
        tracer.send(b"SUB tr 1\r\n")
        tracer.sync()
        svc.send(b"SUB svc.* 1\r\n")
        svc.sync()
        app.send(b"SUB in.ev.> 1\r\n")
        app.sync()
        _hpub(app, b"svc.traced", _hdr(("Nats-Trace-Dest", "tr")))
        app.sync()
        assert _events_of(tracer)[0]["events"] == [
            {"type": "in", "kind": 0, "name": "app", "acc": "APP", "subj": "svc.traced"},
            {"type": "si", "acc": "SVC", "from": "svc.traced", "to": "svc.traced"},
            {"type": "eg", "kind": 0, "name": "service", "acc": "SVC", "sub": "svc.*"}]
        assert [m[0] for m in _messages(svc.sync())] == [b"svc.traced"]
        # not allowed, trace only: stops at the import
        _hpub(app, b"svc.plain", _hdr(("Nats-Trace-Dest", "tr"), ("Nats-Trace-Only", "1")))
        app.sync()
        assert _events_of(tracer)[0]["events"] == [
            {"type": "in", "kind": 0, "name": "app", "acc": "APP", "subj": "svc.plain"},
            {"type": "si", "acc": "SVC", "from": "svc.plain", "to": "svc.plain"}]
        assert _messages(svc.sync()) == []
        # not allowed, delivered: untraced past the import, the header says so
        _hpub(app, b"svc.plain", _hdr(("Nats-Trace-Dest", "tr")))
        app.sync()
        (hdr,) = [m[1] for m in _messages(svc.sync())]
        assert b"\r\nNats-Trace-Dest: trace disabled\r\n" in hdr
        assert _events_of(tracer)[0]["events"] == [
            {"type": "in", "kind": 0, "name": "app", "acc": "APP", "subj": "svc.plain"},
            {"type": "si", "acc": "SVC", "from": "svc.plain", "to": "svc.plain"}]
        # a stream export into APP (the event goes to the publisher's account)
        svc.send(b"SUB tr.svc 5\r\n")
        _hpub(svc, b"ev.2", _hdr(("Nats-Trace-Dest", "tr.svc")))
        assert _events_of(svc, 1)[0]["events"] == [
            {"type": "in", "kind": 0, "name": "service", "acc": "SVC", "subj": "ev.2"},
            {"type": "se", "acc": "APP", "to": "in.ev.2"},
            # the subscription as the exporter sees it (nats-server names its shadow)
            {"type": "eg", "kind": 0, "name": "app", "acc": "APP", "sub": "ev.>"}]
        assert [m[0] for m in _messages(app.sync())] == [b"in.ev.2"]


def test_a_publish_violation_is_the_ingress_error(any_server, tmp_path):
    conf = tmp_path / "p.conf"
    conf.write_text('authorization { users [{user: u, password: p, permissions: '
                    '{publish: {deny: ["secret", "trace.denied"]}}}] }\n')
    srv = any_server("-c", str(conf))
    with _client(srv.port, "pubber", user="u", **{"pass": "p"}) as pub:
        pub.send(b"SUB trace.> 1\r\nSUB secret 2\r\n")
        _hpub(pub, b"secret", _hdr(("Nats-Trace-Dest", "trace.ok")))
        out = pub.sync()
        assert b"-ERR 'Permissions Violation for Publish to \"secret\"'\r\n" in out
        events = _events_of(pub) if not _messages(out) else [json.loads(_messages(out)[0][2])]
        assert [e for e in events[0]["events"] if e["type"] != "in"] == []
        assert events[0]["events"][0]["error"] == 'Permissions Violation for Publish to "secret"'
        # a destination the publisher may not publish to: a violation, the message dropped
        _hpub(pub, b"other", _hdr(("Nats-Trace-Dest", "trace.denied")))
        out = pub.sync()
        assert out == b"-ERR 'Permissions Violation for Publish to \"trace.denied\"'\r\n"


@pytest.mark.parametrize("only", [False, True])
def test_a_destination_that_is_no_subject(any_server, only):
    """Not traced, logged; delivered unless it was to be traced only."""
    srv = any_server()
    with _client(srv.port, "pubber") as pub:
        pub.send(b"SUB foo 1\r\n")
        pairs = [("Nats-Trace-Dest", "trace.*")] + ([("Nats-Trace-Only", "true")] if only else [])
        _hpub(pub, b"foo", _hdr(*pairs))
        got = _messages(pub.sync())
        assert [m[0] for m in got] == ([] if only else [b"foo"])
    srv.wait_log(r'\[ERR\] 127\.0\.0\.1:\d+ - cid:\d+ - "pubber" - Destination "trace\.\*" is not valid, '
                 r"won't be able to trace events")


def test_a_link_that_does_not_trace(any_server, tmp_path):
    """A leaf that speaks no tracing protocol (its CONNECT names none): the egress to it says
    no event comes back from there, and a trace-only message does not go to it; its hop is
    counted all the same."""
    port = free_port()
    conf = tmp_path / "hub.conf"
    conf.write_text("server_name: hub\nleafnodes { port: %d }\n" % port)
    hub = any_server("-c", str(conf))
    with RawClient(port) as leaf, _client(hub.port, "pubber") as pub:
        leaf.send(b'CONNECT {"name":"oldleaf","headers":true,"version":"2.9.0"}\r\n')
        leaf.read_until(b'"connect_info":true', 5)
        leaf.send(b"LS+ foo\r\nPING\r\n")
        leaf.read_until(b"PONG\r\n")
        pub.send(b"SUB tr 1\r\n")
        assert poll(lambda: (pub.send(b"PUB foo 0\r\n\r\n") or b"LMSG foo 0" in leaf.read_available(0.2)), 10)
        _hpub(pub, b"foo", _hdr(("Nats-Trace-Dest", "tr"), ("Nats-Trace-Only", "true")))
        (event,) = _events_of(pub)
        assert event["hops"] == 1 and event["events"][1:] == [
            {"type": "eg", "kind": 4, "name": "oldleaf", "hop": "1",
             "error": "Not delivered because remote does not support message tracing"}]
        _hpub(pub, b"foo", _hdr(("Nats-Trace-Dest", "tr")))
        (event,) = _events_of(pub)
        assert event["hops"] == 1 and event["events"][1:] == [
            {"type": "eg", "kind": 4, "name": "oldleaf", "hop": "1",
             "error": "Message delivered but remote does not support message tracing so no "
                      "trace event generated from there"}]
        got = leaf.read_available(0.5)
        # the one message that went, numbered all the same
        assert got.count(b"HMSG foo ") == 1 and b"Nats-Trace-Hop: 1\r\n" in got, got

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-%s"


def test_traceparent_is_traced_where_the_account_says(any_server, tmp_path):
    """An external W3C `traceparent` (any case, sampled flag set) is traced to the account's
    `msg_trace` destination; not sampled, it is not; with a sampling below 100 a message left
    out is delivered with `Nats-Trace-Dest: trace disabled`, so no later server traces it."""
    conf = tmp_path / "x.conf"
    conf.write_text("""accounts {
  A { users [{user: a, password: p}], msg_trace: {dest: "acc.trace"} }
  S { users [{user: s, password: p}], trace_dest: {dest: "s.trace", sampling: "1%"} }
}
""")
    srv = any_server("-c", str(conf))
    with _client(srv.port, "tracer", user="a", **{"pass": "p"}) as tracer, \
            _client(srv.port, "pubber", user="a", **{"pass": "p"}) as pub:
        tracer.send(b"SUB acc.trace 1\r\nSUB w3c 2\r\n")
        tracer.sync()
        _hpub(pub, b"w3c", _hdr(("TraceParent", TRACEPARENT % "01")))
        _hpub(pub, b"w3c", _hdr(("traceparent", TRACEPARENT % "00")))
        pub.sync()
        got = _messages(tracer.sync())
        assert [m[0] for m in got if m[0] == b"w3c"] == [b"w3c", b"w3c"]
        assert [m[1] for m in got if m[0] == b"w3c"] == [_hdr(("TraceParent", TRACEPARENT % "01")),
                                                          _hdr(("traceparent", TRACEPARENT % "00"))]
        events = [json.loads(p) for s, _, p in got if s == b"acc.trace"]
        events += [] if events else _events_of(tracer)
        assert len(events) == 1
        assert events[0]["request"]["header"] == {"TraceParent": [TRACEPARENT % "01"]}
    with _client(srv.port, "tracer", user="s", **{"pass": "p"}) as tracer, \
            _client(srv.port, "pubber", user="s", **{"pass": "p"}) as pub:
        tracer.send(b"SUB s.trace 1\r\nSUB w3c 2\r\n")
        tracer.sync()
        for _ in range(20):
            _hpub(pub, b"w3c", _hdr(("traceparent", TRACEPARENT % "01")))
        pub.sync()
        got = []

        def each_message_traced_or_left_out():
            got.extend(_messages(tracer.sync()))
            left_out = [m for m in got if m[0] == b"w3c" and b"Nats-Trace-Dest: trace disabled" in m[1]]
            return len(left_out) + len([m for m in got if m[0] == b"s.trace"]) == 20
        assert poll(each_message_traced_or_left_out, timeout=5)
        assert len([m for m in got if m[0] == b"w3c"]) == 20
        disabled = [m for m in got if m[0] == b"w3c" and b"Nats-Trace-Dest: trace disabled" in m[1]]
        assert len(disabled) >= 10           # about 2% are traced (nats-server's draw: <= 1 of 100)
        assert disabled[0][1] == _hdr(("traceparent", TRACEPARENT % "01"), ("Nats-Trace-Dest", "trace disabled"))


def test_an_account_jwt_trace_claim(any_server, tmp_path):
    """Operator mode: the account JWT's `trace` is the account's msg_trace. (The events are
    the system account's: operator mode has one only when `system_account` names it.)"""
    m = Mint(seed=31)
    op, op_jwt = m.operator("OP")
    sys_acc, sys_jwt = m.account(op, "SYS")
    acc, acc_jwt = m.account(op, "TRACED", trace={"dest": "jwt.trace"})
    user, user_jwt = m.user(acc, "u")
    conf = tmp_path / "op.conf"
    conf.write_text("operator: %s\nsystem_account: %s\nresolver: MEMORY\n"
                    "resolver_preload: {%s: %s, %s: %s}\n"
                    % (op_jwt, sys_acc.public, sys_acc.public, sys_jwt, acc.public, acc_jwt))
    srv = any_server("-c", str(conf))
    with RawClient(srv.port) as c:
        sig = base64.urlsafe_b64encode(user.kp.sign(c.info["nonce"].encode())).rstrip(b"=").decode()
        c.connect(jwt=user_jwt, sig=sig, name="jwt-user")
        c.send(b"SUB jwt.trace 1\r\n")
        _hpub(c, b"somewhere", _hdr(("traceparent", TRACEPARENT % "01")))
        (event,) = _events_of(c)
        assert event["events"] == [{"type": "in", "kind": 0, "name": "jwt-user", "acc": acc.public,
                                    "subj": "somewhere"}]


def test_a_stream_takes_a_traced_message_marked_done(any_server, tmp_path):
    """A stream that takes the message is a `js` event, and what it stores says the trace is
    done (`Nats-Trace-Dest: trace disabled`), so a consumer's delivery is not traced again; a
    trace-only message is not stored."""
    srv = any_server("-js", "-sd", str(tmp_path / "js"))
    with _client(srv.port, "pubber") as pub:
        created = pub.request(b"$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["js.>"]}')
        assert b'"error"' not in created, created
        pub.send(b"SUB tr 7\r\n")           # (sid 1 is the requests' replies)
        _hpub(pub, b"js.1", _hdr(("Nats-Trace-Dest", "tr")))
        assert _events_of(pub)[0]["events"][1:] == [{"type": "js", "stream": "S", "subject": "js.1"}]
        _hpub(pub, b"js.2", _hdr(("Nats-Trace-Dest", "tr"), ("Nats-Trace-Only", "true")))
        assert _events_of(pub)[0]["events"][1:] == [{"type": "js", "stream": "S", "subject": "js.2"}]
        info = json.loads(pub.request(b"$JS.API.STREAM.INFO.S", b"").split(b"\r\n\r\n")[-1])
        assert info["state"]["messages"] == 1
        stored = json.loads(pub.request(b"$JS.API.STREAM.MSG.GET.S", b'{"seq":1}').split(b"\r\n\r\n")[-1])
        assert base64.b64decode(stored["message"]["hdrs"]) == _hdr(("Nats-Trace-Dest", "trace disabled"))
