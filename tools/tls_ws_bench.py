#!/usr/bin/env python3
"""tools/tls_ws_bench.py: TLS and WebSocket figures for natsd and nats-server side by side,
interleaved, best of --reps (certificates made on the fly, TLS 1.3 on both).

- tls_pub128 / tls_pubsub128: gobench pub and pub+sub 1:1, 128 B, over TLS.
- handshakes: new TLS connections per second (connect, TLS handshake, read INFO, CONNECT,
  PING/PONG, close), --conns of them from 4 client threads.
- ws_pubsub: nats-py publisher and subscriber over ws://, 128 B, --ws-msgs messages.

usage: python tools/tls_ws_bench.py [--reps 3] [--only tls_pub128,handshakes,...]
"""
import argparse
import asyncio
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tools.serverproc import ServerProcess, free_port  # noqa: E402

GOBENCH = os.environ.get("GOBENCH", "/tmp/gobench/gobench")


def certs(tmp):
    from tests.certs import CA
    ca = CA(tmp)
    cert, key = ca.server_cert()
    return ca.ca_file, cert, key


def gobench(args, url, ca):
    out = subprocess.run([GOBENCH] + args + ["--server", url, "--tls-ca", ca, "--quiet"],
                         capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"RESULT .*", out)
    if not m:
        raise RuntimeError("gobench: %s" % out)
    fields = dict(kv.split("=", 1) for kv in m.group(0).split()[1:])
    return fields


def handshakes(port, ca, n):
    ctx = ssl.create_default_context(cafile=ca)
    done = [0]
    lock = threading.Lock()

    def worker(k):
        for _ in range(k):
            s = socket.create_connection(("127.0.0.1", port))
            buf = b""
            while b"\r\n" not in buf:
                buf += s.recv(4096)
            t = ctx.wrap_socket(s, server_hostname="localhost")
            t.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
            got = b""
            while b"PONG" not in got:
                got += t.recv(4096)
            t.close()
            with lock:
                done[0] += 1
    threads = [threading.Thread(target=worker, args=(n // 4,)) for _ in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.monotonic() - t0)


def ws_pubsub(port, n):
    import nats

    async def go():
        sub_nc = await nats.connect("ws://127.0.0.1:%d" % port)
        pub_nc = await nats.connect("ws://127.0.0.1:%d" % port)
        got = [0]
        finished = asyncio.Event()

        async def cb(m):
            got[0] += 1
            if got[0] == n:
                finished.set()
        await sub_nc.subscribe("ws.bench", cb=cb)
        await sub_nc.flush()
        payload = b"x" * 128
        t0 = time.monotonic()
        for i in range(n):
            await pub_nc.publish("ws.bench", payload)
            if i % 1000 == 0:
                await asyncio.sleep(0)
        await pub_nc.flush()
        await asyncio.wait_for(finished.wait(), 60)
        dt = time.monotonic() - t0
        await pub_nc.close()
        await sub_nc.close()
        return n / dt
    return asyncio.run(go())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="tls_pub128,tls_pubsub128,handshakes,ws_pubsub")
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--ws-msgs", type=int, default=100000)
    args = ap.parse_args()
    only = args.only.split(",")
    tmp = tempfile.mkdtemp(prefix="tlsws-")
    ca, cert, key = certs(tmp)
    nats_server = shutil.which("nats-server") or os.path.join(os.path.dirname(sys.executable), "nats-server")
    cmds = {"nats-server": nats_server, "natsd": "%s -m natsd" % sys.executable}
    results = {}
    for rep in range(args.reps):
        for kind in ("nats-server", "natsd"):
            port, ws = free_port(), free_port()
            conf = os.path.join(tmp, "%s.conf" % kind)
            with open(conf, "w") as f:
                f.write('tls { cert_file: "%s", key_file: "%s" }\nwebsocket { port: %d, no_tls: true }\n'
                        % (cert, key, ws))
            srv = ServerProcess(kind, "%s -a 127.0.0.1 -p %d -c %s" % (cmds[kind], port, conf),
                                os.path.join(tmp, "%s-%d.log" % (kind, rep)))
            try:
                srv.wait_ready()
                url = "tls://127.0.0.1:%d" % port
                if "tls_pub128" in only:
                    r = gobench(["pub", "b.t", "--msgs", "2000000", "--size", "128", "--max-time", "10s"], url, ca)
                    results.setdefault(("tls_pub128", kind), []).append(float(r["pub_rate"]))
                if "tls_pubsub128" in only:
                    r = gobench(["pubsub", "b.t", "--pub", "1", "--sub", "1", "--msgs", "1000000", "--size",
                                 "128", "--max-time", "10s"], url, ca)
                    results.setdefault(("tls_pubsub128", kind), []).append(float(r["sub_rate"]))
                if "handshakes" in only:
                    results.setdefault(("handshakes", kind), []).append(handshakes(port, ca, args.conns))
                if "ws_pubsub" in only:
                    results.setdefault(("ws_pubsub", kind), []).append(ws_pubsub(ws, args.ws_msgs))
            finally:
                srv.stop()
            print("rep %d %-11s %s" % (rep, kind, {k[0]: round(v[-1]) for k, v in results.items()
                                                   if k[1] == kind}), flush=True)
    print("\n%-14s %14s %14s %7s" % ("scenario", "natsd", "nats-server", "ratio"))
    for name in only:
        a, b = max(results[(name, "natsd")]), max(results[(name, "nats-server")])
        print("%-14s %14.0f %14.0f %7.2f" % (name, a, b, a / b))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
