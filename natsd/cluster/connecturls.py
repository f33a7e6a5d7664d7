"""The client URLs of the cluster: what clients get in INFO `connect_urls` (and WebSocket
clients in `ws_connect_urls`) to find the other servers and reconnect to them.

Our own URLs come first, once a first server has joined; each route brings its server's
(counted, since one server can be reached by several routes), and they leave with its last
route or when it enters lame duck mode. Clients that take asynchronous INFO (protocol 1, past their first PONG) are sent a
new INFO whenever the list changes, as nats-server does.
"""
import logging

from natsd.protocol import info_line

log = logging.getLogger("natsd")


class ConnectUrls:
    """The cluster's client and WebSocket URLs, counted per route that brought them."""

    def __init__(self, server):
        self.server = server
        self.client = {}                # url -> count (ours counted once, first)
        self.ws = {}
        self.own = ([], [])             # our own client and WebSocket URLs

    def add_own(self, client_urls, ws_urls):
        """Our URLs; clients see them (first) once another server has joined."""
        self.own = (list(client_urls), list(ws_urls))

    def own_client(self):
        return self.own[0]

    def own_ws(self):
        return self.own[1]

    def add(self, client_urls, ws_urls):
        """A server joined: its URLs in, clients told when something is new."""
        if not self.client and not self.ws:
            self._count(self.client, self.own[0], 1)
            self._count(self.ws, self.own[1], 1)
        changed = self._count(self.client, client_urls, 1)
        ws_changed = self._count(self.ws, ws_urls, 1)
        if changed or ws_changed:
            self.tell_clients(changed, ws_changed)

    def remove(self, client_urls, ws_urls):
        changed = self._count(self.client, client_urls, -1)
        ws_changed = self._count(self.ws, ws_urls, -1)
        if changed or ws_changed:
            self.tell_clients(changed, ws_changed)

    @staticmethod
    def _count(urls, which, delta):
        changed = False
        for u in which or ():
            if not isinstance(u, str):
                continue
            n = urls.get(u, 0) + delta
            if n > 0:
                changed |= u not in urls
                urls[u] = n
            elif u in urls:
                del urls[u]
                changed = True
        return changed

    def tell_clients(self, plain, ws):
        """An asynchronous INFO to the clients that take one."""
        server = self.server
        if server.shutting_down:
            return
        for c in list(server.clients.values()):
            st = c.state
            if c.closing or not c.connected or c.connect_info_due:
                continue
            if (ws if st.ws else plain) and _protocol(st.connect) >= 1:
                c.send_bytes(info_line(server.info_dict(c, with_nonce=False)))


def _protocol(connect):
    try:
        return int((connect or {}).get("protocol") or 0)
    except (TypeError, ValueError):
        return 0
