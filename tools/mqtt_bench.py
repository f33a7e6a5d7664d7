#!/usr/bin/env python3
"""tools/mqtt_bench.py: MQTT through natsd against nats-server on this machine, the same client
program for both, interleaved, best of --reps.

- pub_qos0: --pubs MQTT clients publish QoS 0 (128 B) as fast as the socket takes them; one
  NATS subscriber counts what arrives.
- pub_qos1: the same at QoS 1, each publisher keeping --window PUBLISHes unacknowledged (each
  is stored in `$MQTT_msgs` before its PUBACK, as on nats-server).
- nats_to_mqtt_qos0 / nats_to_mqtt_qos1: a NATS publisher, --subs MQTT subscribers at QoS 0
  (QoS 1 subscriptions get NATS messages at QoS 0 on both servers).
- connect_storm: --storm MQTT clients connect with persistent sessions (clean=0) and
  subscribe at QoS 1, a few at a time, then disconnect: sessions per second.

Prints messages (or sessions) per second per server and the natsd/nats-server ratio.

usage: python tools/mqtt_bench.py [--reps 3] [--msgs 100000] [--only pub_qos0,...]
"""
import argparse
import os
import socket
import struct
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tests.support import mqttraw as M  # noqa: E402
from tools.serverproc import ServerProcess, free_port  # noqa: E402

VENV_BIN = os.path.dirname(sys.executable)
COMMANDS = {"natsd": sys.executable + " -m natsd", "nats-server": os.path.join(VENV_BIN, "nats-server")}
PAYLOAD = b"x" * 128


def start(kind, workdir):
    port, mport = free_port(), free_port()
    conf = os.path.join(workdir, kind + ".conf")
    with open(conf, "w") as f:
        f.write("server_name: %s\nport: %d\njetstream { store_dir: '%s' }\nmqtt { port: %d }\n"
                % (kind, port, os.path.join(workdir, kind + "-js"), mport))
    srv = ServerProcess(kind, "%s -c %s" % (COMMANDS[kind], conf), os.path.join(workdir, kind + ".log"))
    srv.wait_ready()
    return srv, port, mport


def nats_counter(port, subject, expect):
    """A raw NATS subscriber: a thread that counts the messages until `expect` arrived."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB %s 1\r\nPING\r\n' % subject)
    buf = b""
    while b"PONG" not in buf:
        buf += s.recv(4096)
    state = {"n": 0, "done": threading.Event()}

    def run():
        tail = b""
        while state["n"] < expect:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data = tail + chunk
            state["n"] += data.count(b"MSG ")
            tail = data[-4:]
            state["n"] -= tail.count(b"MSG ")
        state["done"].set()
    threading.Thread(target=run, daemon=True).start()
    return state, s


def mqtt_client(mport, cid, clean=True):
    c = M.MqttRaw(mport, timeout=60)
    c.send(M.connect(cid, clean))
    assert c.read_packet(30)[:4] == b"\x20\x02\x00\x00" or clean is False
    return c


def pub_qos(port, mport, msgs, pubs, qos, window):
    per = msgs // pubs
    state, sock = nats_counter(port, b"bench.>", per * pubs)
    clients = [mqtt_client(mport, "p%d" % i) for i in range(pubs)]
    packets = [[M.publish("bench/%d" % i, PAYLOAD, qos=qos, pi=(k % 60000) + 1) for k in range(per)]
               for i in range(len(clients))]

    def send(c, pkts):
        if qos == 0:
            for k in range(0, len(pkts), 500):
                c.sock.sendall(b"".join(pkts[k:k + 500]))
            return
        acked = 0
        sent = 0
        while acked < len(pkts):
            if sent < len(pkts) and sent - acked < window:
                n = min(window - (sent - acked), len(pkts) - sent)
                c.sock.sendall(b"".join(pkts[sent:sent + n]))
                sent += n
            c.buf += c.sock.recv(65536)
            k = len(c.buf) // 4
            acked += k
            c.buf = c.buf[k * 4:]
    t0 = time.perf_counter()
    threads = [threading.Thread(target=send, args=(c, p)) for c, p in zip(clients, packets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state["done"].wait(120)
    dt = time.perf_counter() - t0
    for c in clients:
        c.close()
    sock.close()
    return state["n"] / dt


def nats_to_mqtt(port, mport, msgs, subs, sub_qos):
    clients = [mqtt_client(mport, "s%d" % i) for i in range(subs)]
    for c in clients:
        c.send(M.subscribe(1, [("feed/#", sub_qos)]))
        c.read_packet(30)
    counts = [0] * subs

    def read(i, c):
        total = msgs
        while counts[i] < total:
            chunk = c.sock.recv(1 << 20)
            if not chunk:
                return
            c.buf += chunk
            pos = 0
            while True:
                got = M._split(c.buf[pos:])
                if got is None:
                    break
                pos += got
                counts[i] += 1
            c.buf = c.buf[pos:]
    readers = [threading.Thread(target=read, args=(i, c)) for i, c in enumerate(clients)]
    for t in readers:
        t.start()
    pub = socket.create_connection(("127.0.0.1", port))
    pub.sendall(b'CONNECT {"verbose":false}\r\n')
    frame = b"PUB feed.x %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD)
    t0 = time.perf_counter()
    for k in range(0, msgs, 1000):
        pub.sendall(frame * min(1000, msgs - k))
    pub.sendall(b"PING\r\n")
    for t in readers:
        t.join(120)
    dt = time.perf_counter() - t0
    pub.close()
    for c in clients:
        c.close()
    return sum(counts) / dt


def connect_storm(port, mport, n, parallel=8):
    done = [0]
    lock = threading.Lock()

    def worker(w):
        for i in range(w, n, parallel):
            c = M.MqttRaw(mport, timeout=60)
            c.send(M.connect("storm-%d" % i, clean=False))
            c.read_packet(60)
            c.send(M.subscribe(1, [("dev/%d/cmd" % i, 1)]))
            c.read_packet(60)
            c.send(M.DISCONNECT)
            c.close()
            with lock:
                done[0] += 1
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.perf_counter() - t0)


def scenarios(args):
    return {
        "pub_qos0": lambda p, m: pub_qos(p, m, args.msgs, args.pubs, 0, args.window),
        "pub_qos1": lambda p, m: pub_qos(p, m, args.msgs // 5, args.pubs, 1, args.window),
        "nats_to_mqtt_qos0": lambda p, m: nats_to_mqtt(p, m, args.msgs // args.subs, args.subs, 0),
        "nats_to_mqtt_qos1": lambda p, m: nats_to_mqtt(p, m, args.msgs // args.subs, args.subs, 1),
        "connect_storm": lambda p, m: connect_storm(p, m, args.storm),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--msgs", type=int, default=100_000)
    ap.add_argument("--pubs", type=int, default=4)
    ap.add_argument("--subs", type=int, default=4)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--storm", type=int, default=1000)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    table = scenarios(args)
    names = [n for n in table if not args.only or n in args.only.split(",")]
    best = {(n, k): 0.0 for n in names for k in COMMANDS}
    for rep in range(args.reps):
        for name in names:
            for kind in (COMMANDS if rep % 2 == 0 else list(COMMANDS)[::-1]):
                with tempfile.TemporaryDirectory() as d:
                    srv, port, mport = start(kind, d)
                    try:
                        rate = table[name](port, mport)
                    finally:
                        srv.stop()
                best[(name, kind)] = max(best[(name, kind)], rate)
                print("rep %d %-18s %-12s %12.0f/s" % (rep + 1, name, kind, rate), flush=True)
    print("\n%-18s %14s %14s %7s" % ("scenario", "natsd", "nats-server", "ratio"))
    for name in names:
        a, b = best[(name, "natsd")], best[(name, "nats-server")]
        print("%-18s %14.0f %14.0f %6.2fx" % (name, a, b, a / b if b else 0))


if __name__ == "__main__":
    main()
