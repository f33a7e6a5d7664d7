"""Listening sockets on the event loop (client, leaf, route, WebSocket and monitoring ports),
`host:port` text as nats-server prints it, the nonces of INFO, and the URLs clients reach a
listener by (INFO connect_urls)."""
import base64
import errno
import ipaddress
import logging
import os
import socket

from natsd.net.dialer import host_label

log = logging.getLogger("natsd")


def block_get(raw: dict, *names, default=None):
    """A field of a parsed config block by any of its (lower-case) names."""
    for k, v in raw.items():
        if k.lower() in names:
            return v
    return default


def block_address(raw: dict) -> tuple[str, int]:
    """(host, port) of a listener block (`websocket {}`, `mqtt {}`): `host`/`net` and `port`,
    or `listen`; the host defaults to 0.0.0.0 (nats-server's DEFAULT_HOST)."""
    listen = block_get(raw, "listen")
    host = str(block_get(raw, "host", "net", default="") or "")
    port = block_get(raw, "port", default=0) or 0
    if isinstance(listen, str) and ":" in listen:
        h, _, p = listen.rpartition(":")
        host, port = h or host, int(p)
    elif isinstance(listen, int):
        port = listen
    return host or "0.0.0.0", port


class ListenerBlock:
    """What a `websocket {}` and an `mqtt {}` block share, as nats-server reads them: the
    address, the `tls {}` block, the block's own authorization and no_auth_user."""

    def __init__(self, raw: dict):
        from natsd.net.tls import ServerTls, TlsSettings, _seconds
        self.host, self.port = block_address(raw)
        tls = block_get(raw, "tls")
        self.tls = ServerTls(TlsSettings(tls)) if tls else None
        auth = block_get(raw, "authorization", "authentication", default={}) or {}
        self.username = str(block_get(auth, "user", "username", default="") or "")
        self.password = str(block_get(auth, "password", "pass", default="") or "")
        self.token = str(block_get(auth, "token", default="") or "")
        self.auth_timeout = _seconds(block_get(auth, "timeout"), 0.0)
        self.no_auth_user = str(block_get(raw, "no_auth_user", default="") or "")


def new_nonce():
    return base64.urlsafe_b64encode(os.urandom(11)).decode().rstrip("=")


def host_port(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


WILDCARDS = ("", "0.0.0.0", "::")


def plain_addr(addr):
    """(host, port) of a socket address, an IPv4-mapped IPv6 host as its IPv4 form: what Go
    reports for a connection that reached a dual-stack listener over IPv4."""
    host, port = addr[0], addr[1]
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, port


def _share_port(sock, reuse_port):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)


def _wildcard_socket(port, reuse_port):
    """A dual-stack socket on [::]:port, as Go's net.Listen gives for a wildcard host
    (0.0.0.0 included): nats-server with no host is reachable over IPv4 and IPv6 both. None
    where the kernel has no IPv6."""
    if not socket.has_ipv6:
        return None
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        _share_port(sock, reuse_port)
        sock.bind(("::", port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise
        return None
    return sock


class Listener:
    """A listening socket on the loop; accepted sockets go to `on_accept(sock, (host, port))`.
    With reuse_port (SO_REUSEPORT) other processes may listen on the same port, the kernel
    spreading new connections over them (NATSD_REUSE_PORT; docs/multicore.md)."""

    def __init__(self, loop, host, port, on_accept, backlog=4096, reuse_port=False):
        port = port if port > 0 else 0
        self.sock = _wildcard_socket(port, reuse_port) if host in WILDCARDS else None
        if self.sock is None:
            infos = socket.getaddrinfo(host or None, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
            family, stype, proto, _, addr = infos[0]
            self.sock = socket.socket(family, stype, proto)
            _share_port(self.sock, reuse_port)
            self.sock.bind(addr)
        self.sock.listen(backlog)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.host = host
        self.loop = loop
        self.on_accept = on_accept
        loop.add_handler(self.sock.fileno(), self)

    def on_event(self, events):
        for _ in range(256):
            try:
                sock, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.error("Error accepting client connection: %s", e)
                return
            self.on_accept(sock, plain_addr(addr))

    def close(self):
        if self.sock is not None:
            self.loop.remove_handler(self.sock.fileno())
            self.sock.close()
            self.sock = None


def stop_links(listener, dialers, connections):
    """A link subsystem (routes, gateways) stops: no more accepting or dialing, and every
    connection closes for good (no reconnect)."""
    if listener is not None:
        listener.close()
    for d in list(dialers):
        d.cancel()
    dialers.clear()
    for c in connections:
        c.state.no_reconnect = True
        c.schedule_close("Server Shutdown")


def non_local_ips(host):
    """nats-server's getNonLocalIPsIfHostIsIPAny: for 0.0.0.0 or ::, every global unicast
    address of the machine's interfaces; None for any other host."""
    try:
        if not ipaddress.ip_address(host).is_unspecified:
            return None
    except ValueError:
        return None
    import psutil
    log.debug("Get non local IPs for %s", '"%s"' % host)
    ips = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            try:
                ip = ipaddress.ip_address(a.address.split("%")[0])
            except ValueError:
                continue
            if (ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified
                    or str(ip) == "255.255.255.255"):
                continue
            log.debug("  ip=%s", ip)
            ips.append(str(ip))
    return ips


def connect_urls(advertise, host, port):
    """The URLs clients reach this server by (nats-server's getConnectURLs)."""
    if advertise:
        h, _, p = advertise.rpartition(":")
        if not h or not p.isdigit():
            h, p = advertise, port
        return [host_label(h.strip("[]"), int(p))]
    ips = non_local_ips(host)
    if ips:
        return [host_label(ip, port) for ip in ips]
    if ips is not None:
        log.error('Address "%s" can not be resolved properly', host)
        return []
    return [host_label(host, port)]
