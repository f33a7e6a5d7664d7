"""What an exporter's responder receives for a service import request: nats-server puts who
asked in `Nats-Request-Info` (the account and round trip; the whole ClientInfo where the
import shares it; a chained import names the middle account as `svc`), last in the headers,
and answers to a reply of its own (`_R_.<6>.<6>`). natsd and nats-server side by side, the
bytes compared with the round trip, times, ids and server names masked."""
import json
import re

from tests.support.rawclient import RawClient

CONF = """accounts {
  SVC { users [{user: svc, password: p}], exports [{service: "svc.>"}] }
  MID {
    users [{user: mid, password: p}]
    imports [{service: {account: SVC, subject: "svc.c"}}]
    exports [{service: "svc.c"}]
  }
  APP {
    users [{user: app, password: p}]
    imports [
      {service: {account: SVC, subject: "svc.a"}}
      {service: {account: SVC, subject: "svc.b"}, share: true}
      {service: {account: MID, subject: "svc.c"}}
    ]
  }
}
"""


def _masked(raw: bytes) -> str:
    text = raw.decode()
    text = re.sub(r'"rtt":\d+', '"rtt":N', text)
    text = re.sub(r'"start":"[^"]+"', '"start":T', text)
    text = re.sub(r'"id":\d+', '"id":N', text)
    text = re.sub(r'"server":"N[A-Z0-9]{55}"', '"server":S', text)
    text = re.sub(r" _R_\.[A-Za-z0-9]{6}\.[A-Za-z0-9]{6} ", " _R_.XXXXXX.YYYYYY ", text)
    # the sizes vary with the masked values (checked on their own below)
    return re.sub(r"HMSG (\S+) (\d+) (\S+) \d+ \d+", r"HMSG \1 \2 \3 H T", text)


def test_the_responder_learns_who_asked(any_server, tmp_path):
    conf = tmp_path / "ri.conf"
    conf.write_text(CONF)
    srv = any_server("-c", str(conf))
    with RawClient(srv.port) as svc, RawClient(srv.port) as app:
        svc.connect(user="svc", name="responder", **{"pass": "p"})
        svc.send(b"SUB svc.> 1\r\n")
        svc.sync()
        app.connect(user="app", name="asker", lang="py", version="1.2", **{"pass": "p"})
        app.send(b"PUB svc.a r1 2\r\nhi\r\nHPUB svc.b r2 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n"
                 b"PUB svc.c r3 0\r\n\r\n")
        app.sync()
        got = b""
        while got.count(b"HMSG") < 3:
            got += svc.read_until(b"\r\n\r\n")
        got += svc.sync()
    assert _masked(got) == (
        'HMSG svc.a 1 _R_.XXXXXX.YYYYYY H T\r\nNATS/1.0\r\nNats-Request-Info: {"acc":"APP","rtt":N}\r\n\r\nhi\r\n'
        'HMSG svc.b 1 _R_.XXXXXX.YYYYYY H T\r\nNATS/1.0\r\nA: b\r\nNats-Request-Info: {"start":T,'
        '"host":"127.0.0.1","id":N,"acc":"APP","user":"app","name":"asker","lang":"py","ver":"1.2",'
        '"rtt":N,"server":S,"kind":"Client","client_type":"nats"}\r\n\r\nhi\r\n'
        'HMSG svc.c 1 _R_.XXXXXX.YYYYYY H T\r\nNATS/1.0\r\nNats-Request-Info: {"acc":"APP","svc":"MID","rtt":N}'
        '\r\n\r\n\r\n')
    # the sizes on the wire are the frames' own
    for m in re.finditer(rb"HMSG \S+ \d+ \S+ (\d+) (\d+)\r\n", got):
        hdr_end = got.index(b"\r\n\r\n", m.end()) + 4
        assert int(m.group(1)) == hdr_end - m.end()
        assert json.loads(re.search(rb"Nats-Request-Info: (.*)\r\n", got[m.end():hdr_end]).group(1))
