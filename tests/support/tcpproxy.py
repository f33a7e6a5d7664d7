"""The TCP proxy a test controls, to partition a route: `cut()` stops carrying bytes both ways
while the connections stay open (what a network partition looks like to both ends: silence,
found only by the route's pings), `heal()` drops what was cut and carries new connections
again; `throttle(rate)` carries at most `rate` bytes a second towards the target (a slow
reader behind the proxy)."""
import selectors
import socket
import threading
import time

TICK = 0.02                             # a throttled direction moves rate*TICK bytes per tick


class TcpProxy:
    def __init__(self, target_port, host="127.0.0.1"):
        self.target = (host, target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.pairs = []
        self.cut_now = False
        self.rate = None                # bytes a second towards the target (None: no limit)
        self.closed = False
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a, b):
        peers = {a: b, b: a}
        # a selector (epoll), not select(): the test process may hold descriptors past 1024
        sel = selectors.DefaultSelector()
        try:
            sel.register(a, selectors.EVENT_READ)
            sel.register(b, selectors.EVENT_READ)
            while not self.closed:
                ready = [key.fileobj for key, _ in sel.select(0.1)]
                if self.cut_now:
                    time.sleep(0.05)            # held open, nothing carried
                    continue
                for s in ready:
                    slow = s is a and self.rate
                    data = s.recv(max(1, int(self.rate * TICK)) if slow else 65536)
                    if not data:
                        return
                    peers[s].sendall(data)
                    if slow:
                        time.sleep(TICK)
        except (OSError, ValueError):           # ValueError: closed while registered
            return
        finally:
            sel.close()
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self):
        self.cut_now = True

    def throttle(self, rate):
        self.rate = rate

    def heal(self):
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for a, b in pairs:                      # what was held during the cut is dropped
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.cut_now = False

    def close(self):
        self.closed = True
        self.listener.close()
        self.heal()
