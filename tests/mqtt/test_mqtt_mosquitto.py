"""Eclipse Mosquitto's command-line clients (Debian's mosquitto-clients: mosquitto_pub and
mosquitto_sub, a C implementation apart from paho's Python) against natsd and nats-server,
the same scenario on each: a retained message, QoS 0/1/2 publishes, a NATS publisher on the
other side, a persistent session that queues while the device is away, and a will sent
when a subscriber dies by kill -9. What the clients print must be the same on both."""
import asyncio
import queue
import shutil
import signal
import subprocess
import threading
import time

import nats
import pytest

from tests.support.mqttservers import on_both

pytestmark = pytest.mark.skipif(shutil.which("mosquitto_sub") is None,
                                reason="mosquitto-clients is not installed (make test installs it)")

FORMAT = "%t|%p|%q|%r"                  # topic, payload, QoS, retain flag


def pub(port, topic, payload, *args):
    subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-t", topic, "-m", payload]
                   + list(args), check=True, timeout=15, capture_output=True)


def is_message(line):
    return "|" in line and not line.startswith("Client ")


class Sub:
    """A running mosquitto_sub (-d: it reports its packets), once it has its SUBACK. Its
    lines are read on a thread (stdbuf: line by line, as on a terminal)."""

    def __init__(self, port, topic, *args):
        self.proc = subprocess.Popen(
            ["stdbuf", "-oL", "mosquitto_sub", "-d", "-h", "127.0.0.1", "-p", str(port), "-t", topic,
             "-F", FORMAT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines, self.early = [], []
        self.queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next(lambda line: "received SUBACK" in line, "a SUBACK")

    def _read(self):
        for line in self.proc.stdout:
            self.queue.put(line.rstrip("\n"))

    def _next(self, wanted, what, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("mosquitto_sub printed no %s: %r" % (what, self.lines))
            self.lines.append(line)
            if wanted(line):
                return line
            if is_message(line):
                self.early.append(line)  # a persistent session's: before its SUBACK

    def messages(self, count):
        """The next `count` messages it prints (its debug lines skipped)."""
        out, self.early = self.early[:count], self.early[count:]
        return out + [self._next(is_message, "message") for _ in range(count - len(out))]

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            # seen once under load, on a SIGTERM between its packets: it went on waiting
            # (both servers had closed its connection at once in 20 tries each)
            self.proc.kill()
            self.proc.wait(5)


async def nats_publish(url, subject, payload):
    nc = await nats.connect(url)
    await nc.publish(subject, payload)
    await nc.flush()
    await nc.close()


def scenario(srv):
    port = srv.mqtt_port
    got = {}
    pub(port, "sensors/t1", "21.5", "-r", "-q", "1", "-i", "retainer")
    sub = Sub(port, "sensors/#", "-q", "2", "-i", "watcher")
    try:
        got["retained"] = sub.messages(1)
        for qos in "012":
            pub(port, "sensors/q" + qos, "at qos " + qos, "-q", qos, "-i", "pub-q" + qos)
        asyncio.run(nats_publish(srv.url, "sensors.from.nats", b"hello from NATS"))
        got["live"] = sorted(sub.messages(4))

        # a persistent session (-c): what is published while the device is away waits for it
        away = Sub(port, "cmd/dev-7", "-c", "-q", "1", "-i", "dev-7")
        away.stop()
        pub(port, "cmd/dev-7", "reboot", "-q", "1", "-i", "ops")
        back = Sub(port, "cmd/dev-7", "-c", "-q", "1", "-i", "dev-7")
        try:
            got["queued"] = back.messages(1)
        finally:
            back.stop()

        # a will: the device dies without DISCONNECT
        dying = Sub(port, "cmd/dev-9", "-i", "dev-9", "--will-topic", "sensors/dev-9/status",
                    "--will-payload", "gone", "--will-qos", "1", "--will-retain")
        dying.stop(signal.SIGKILL)
        got["will"] = sub.messages(1)
    finally:
        sub.stop()
    late = Sub(port, "sensors/dev-9/#", "-i", "late", "-C", "1")   # the will was retained
    got["will retained"] = late.messages(1)
    late.stop()
    return got


def test_mosquitto_clients_see_the_same_on_both(starters, tmp_path):
    ours, theirs = on_both(starters, tmp_path, scenario)
    assert ours == theirs
    assert ours == {
        "retained": ["sensors/t1|21.5|1|1"],
        "live": ["sensors/from/nats|hello from NATS|0|0", "sensors/q0|at qos 0|0|0",
                 "sensors/q1|at qos 1|1|0", "sensors/q2|at qos 2|2|0"],
        "queued": ["cmd/dev-7|reboot|1|0"],
        "will": ["sensors/dev-9/status|gone|1|0"],
        "will retained": ["sensors/dev-9/status|gone|0|1"],  # at the late subscription's QoS
    }
