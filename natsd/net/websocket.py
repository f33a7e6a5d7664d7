"""WebSocket clients: the `websocket {}` listener and the HTTP upgrade, as nats-server's
websocket.go does them. Frames are natsd/_core/ws.pyx's (a codec on the connection, so a
WebSocket client is an ordinary client connection to the parser and router); this module
owns the settings, the accept, the upgrade request's checks and answer (origins, key,
version, permessage-deflate, Nats-No-Masking, cookies), the handshake timeout and the INFO.
"""
import base64
import logging
from email.utils import formatdate
from urllib.parse import urlsplit

from natsd._core.ws import WsCodec
from natsd.digest import sha1
from natsd.gofmt import go_float
from natsd.net.listener import ListenerBlock, block_get
from natsd.net.tls import cert_not_after

log = logging.getLogger("natsd")

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
DEFAULT_HANDSHAKE_TIMEOUT = 2.0
BROWSER_FRAME = 4096            # nats-server wsFrameSizeForBrowsers
LEAF_PATH = "/leafnode"
MQTT_PATH = "/mqtt"
_STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
                500: "Internal Server Error"}


class WsSettings(ListenerBlock):
    """A `websocket {}` block as nats-server reads it."""

    def __init__(self, raw):
        super().__init__(raw)
        self.advertise = str(block_get(raw, "advertise", default="") or "")
        self.no_tls = bool(block_get(raw, "no_tls", default=False))
        self.same_origin = bool(block_get(raw, "same_origin", default=False))
        origins = block_get(raw, "allowed_origins", "allowed_origin", "allow_origins", "allow_origin",
                       "origins", "origin", default=[]) or []
        self.allowed_origins = [origins] if isinstance(origins, str) else list(origins)
        self.compression = bool(block_get(raw, "compression", "compress", default=False))
        from natsd.net.tls import _seconds
        self.handshake_timeout = _seconds(block_get(raw, "handshake_timeout"), DEFAULT_HANDSHAKE_TIMEOUT)
        self.handshake_timeout_set = block_get(raw, "handshake_timeout") is not None
        self.jwt_cookie = str(block_get(raw, "jwt_cookie", default="") or "")
        self.username_cookie = str(block_get(raw, "user_cookie", default="") or "")
        self.password_cookie = str(block_get(raw, "pass_cookie", default="") or "")
        self.token_cookie = str(block_get(raw, "token_cookie", default="") or "")
        self.headers = dict(block_get(raw, "headers", default={}) or {})

    @property
    def auth_override(self):
        return bool(self.username or self.token)


class WebSockets:
    """The WebSocket listener of one Server: client connections that start with an HTTP
    upgrade and then speak NATS in binary frames."""

    def __init__(self, server, settings):
        self.server = server
        self.settings = settings
        self.listener = None
        self.ocsp_peer = None           # tls ocsp_peer: WebSocket clients' certificates checked
        tls = settings.tls
        if tls is not None and tls.settings.ocsp_peer is not None:
            from natsd.net.ocsppeer import OcspPeer
            self.ocsp_peer = OcspPeer(tls.settings.ocsp_peer, tls.settings.ca_file)

    def start(self):
        from natsd.net.listener import Listener, host_port
        s = self.settings
        self.listener = Listener(self.server.loop, s.host, 0 if s.port < 0 else s.port, self._accept)
        log.info("Listening for websocket clients on %s://%s",
                 "wss" if s.tls is not None else "ws", host_port(s.host, self.listener.port))
        if s.tls is None:
            log.warning("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!")

    @property
    def port(self):
        return self.listener.port if self.listener is not None else 0

    def varz(self):
        """nats-server's WebsocketOptsVarz: what the block configures, zero values left out."""
        s = self.settings
        tls = s.tls.settings if s.tls is not None else None
        v = {"host": s.host or "0.0.0.0", "port": self.port, "advertise": s.advertise,
             "no_auth_user": s.no_auth_user, "jwt_cookie": s.jwt_cookie,
             "handshake_timeout": int(s.handshake_timeout * 1e9) if s.handshake_timeout_set else 0,
             "auth_timeout": go_float(s.auth_timeout), "no_tls": s.no_tls,
             "tls_map": bool(tls and tls.verify_and_map),
             "tls_pinned_certs": sorted(tls.pinned) if tls is not None else [],
             "same_origin": s.same_origin, "allowed_origins": list(s.allowed_origins),
             "compression": s.compression, "tls_cert_not_after": cert_not_after(tls)}
        return {k: val for k, val in v.items() if val}

    def connect_urls(self):
        """The URLs WebSocket clients reach us by (INFO ws_connect_urls in a cluster)."""
        from natsd.net.listener import connect_urls
        s = self.settings
        return connect_urls(s.advertise, s.host or "0.0.0.0", self.port)

    def shutdown(self):
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    def _accept(self, sock, addr):
        server = self.server
        if server.shutting_down or server.lame_duck:
            sock.close()
            return
        c = server.new_client(sock, addr)
        c.codec = WsCodec(True)
        c.codec.compress = False
        c.state.ws = True
        if self.settings.tls is not None:
            self.settings.tls.begin(c)
            c.tls_sniff = False
            c.tls_active = True
        c.state.tls_timer = server.loop.call_later(self.settings.handshake_timeout,
                                                   self._handshake_timeout, c)

    def tls_ready(self, c):
        """wss: TLS is up; the upgrade request must follow within the handshake timeout."""
        c.state.tls_timer = self.server.loop.call_later(self.settings.handshake_timeout,
                                                        self._handshake_timeout, c)

    def _handshake_timeout(self, c):
        if not c.closed and not c.closing and not getattr(c.state, "ws_upgraded", False):
            log.error("%s - websocket handshake error: read timeout", _peer(c))
            c.schedule_close("Client Closed")

    # ---- the upgrade (ClientProtocol.codec_head calls this) ----

    def upgrade(self, c):
        """The client's request head is in: answer 101 and start frames, or an HTTP error."""
        head = c.codec.take_head()
        try:
            method, path, headers = _parse_request(head)
        except ValueError:
            return self._refuse(c, 400, "bad request")
        s = self.settings
        leaf = path.endswith(LEAF_PATH)
        mqtt = not leaf and path.endswith(MQTT_PATH)
        if mqtt and self.server.mqtt is None:
            return self._refuse(c, 404, "mqtt websocket endpoint not enabled")
        if method != "GET":
            return self._refuse(c, 405, "request method must be GET")
        if not headers.get("host"):
            return self._refuse(c, 400, "'Host' missing in request")
        if not _has_token(headers, "upgrade", "websocket"):
            return self._refuse(c, 400, "invalid value for header 'Upgrade'")
        if not _has_token(headers, "connection", "upgrade"):
            return self._refuse(c, 400, "invalid value for header 'Connection'")
        key = headers.get("sec-websocket-key", [""])[0]
        if not key:
            return self._refuse(c, 400, "key missing")
        try:
            if len(base64.b64decode(key, validate=True)) != 16:
                raise ValueError
        except ValueError:
            return self._refuse(c, 400, "invalid websocket key")
        if not _has_token(headers, "sec-websocket-version", "13"):
            return self._refuse(c, 400, "invalid version")
        origin_error = self._check_origin(c, headers)
        if origin_error:
            return self._refuse(c, 403, "origin not allowed: %s" % origin_error)
        compress = s.compression and _pmc_offered(headers)
        no_masking = headers.get("nats-no-masking", [""])[0] == "true"
        resp = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
                "Sec-WebSocket-Accept: " + _accept_key(key)]
        if compress:
            resp.append("Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; "
                        "client_no_context_takeover")
        if no_masking:
            resp.append("Nats-No-Masking: true")
        if mqtt:
            resp.append("Sec-Websocket-Protocol: mqtt")
        for k, v in s.headers.items():
            resp.append("%s: %s" % (k, v))
        codec = c.codec
        codec.control_raw(("\r\n".join(resp) + "\r\n\r\n").encode())
        codec.compress = compress
        codec.mask_read = not no_masking
        ua = headers.get("user-agent", [""])[0]
        if ua.startswith("Mozilla/") and not leaf:
            codec.max_frame = BROWSER_FRAME
        codec.start_frames()
        st = c.state
        st.ws_upgraded = True
        if st.tls_timer is not None:
            st.tls_timer.cancel()
            st.tls_timer = None
        if leaf:
            ln = self.server.leafnodes
            if ln is None or not ln.opts.port:
                log.error("Not configured to accept leaf node connections")
                c.flush_now()
                c.codec.close_sent = True
                c.schedule_close("Client Closed")
                return
            ln.accept_websocket(c)
            return
        st.ws_cookies = self._cookies(headers)
        fwd = headers.get("x-forwarded-for", [""])[0].strip()
        if fwd:
            import ipaddress
            try:
                ipaddress.ip_address(fwd)
                st.host = fwd
            except ValueError:
                pass
        if mqtt:
            self.server.mqtt.accept_websocket(c)
            return
        self.server.client_ready(c)

    def _refuse(self, c, status, reason):
        log.error("%s - websocket handshake error: %s", _peer(c), reason)
        text = _STATUS_TEXT.get(status, "Error")
        body = (text + "\n").encode()
        head = ("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                "Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\n"
                "Date: %s\r\nContent-Length: %d\r\n\r\n"
                % (status, text, formatdate(usegmt=True), len(body))).encode()
        c.codec.control_raw(head + body)
        c.flush_now()
        c.schedule_close("Client Closed")

    def _check_origin(self, c, headers):
        s = self.settings
        if not s.same_origin and not s.allowed_origins:
            return None
        origin = (headers.get("origin") or headers.get("sec-websocket-origin") or [""])[0]
        if not origin:
            return None
        u = urlsplit(origin)
        if not u.scheme or not u.netloc:
            return 'parse "%s": invalid URI for request' % origin
        oh, op = _host_port(u.scheme == "https", u.netloc)
        if s.same_origin:
            tls = s.tls is not None
            rh, rp = _host_port(tls, headers.get("host", [""])[0])
            if oh != rh or op != rp or u.scheme.lower() != ("https" if tls else "http"):
                return "not same origin"
        if s.allowed_origins:
            for ao in s.allowed_origins:
                a = urlsplit(ao)
                ah, ap = _host_port(a.scheme == "https", a.netloc)
                if ah == oh and a.scheme == u.scheme and ap == op:
                    return None
            return "not in the allowed list"
        return None

    def _cookies(self, headers):
        s = self.settings
        out = {}
        for line in headers.get("cookie", []):
            for part in line.split(";"):
                k, _, v = part.strip().partition("=")
                for field, name in (("jwt", s.jwt_cookie), ("user", s.username_cookie),
                                    ("pass", s.password_cookie), ("auth_token", s.token_cookie)):
                    if name and k == name:
                        out[field] = v
        return out

    def connect_credentials(self, c, info):
        """A WebSocket CONNECT: cookies fill in what it left out; the websocket block's own
        authorization replaces the server's (nats-server authOverride)."""
        cookies = getattr(c.state, "ws_cookies", None) or {}
        for k, v in cookies.items():
            if not info.get(k):
                info = dict(info, **{k: v})
        return info

    def authenticate(self, auth, info, st):
        """(AuthResult or None, whether auth is required) for a WebSocket CONNECT: the
        websocket block's user/password or token when it has one (nats-server authOverride),
        else the server's own authorization, no_auth_user as the websocket block sets it."""
        from natsd.accounts.clientinfo import REDACTED
        from natsd.auth.authenticator import AuthResult
        s = self.settings
        if s.token:
            ok = auth.check_secret(s.token, str(info.get("auth_token") or ""), True)
            return (AuthResult(REDACTED, None, None) if ok else None), True
        if s.username:
            ok = (info.get("user") == s.username
                  and auth.check_secret(s.password, str(info.get("pass") or ""), True))
            return (AuthResult(s.username, None, None) if ok else None), True
        if s.no_auth_user and not (info.get("user") or info.get("pass") or info.get("auth_token")
                                   or info.get("nkey") or info.get("jwt")):
            info = dict(info, user=s.no_auth_user)
            p = auth.users.get(s.no_auth_user)
            if p is not None:
                return auth._bind(p, "WEBSOCKET"), True
        return auth.authenticate(info, st.nonce, kind="WEBSOCKET", defer=True, cert=st.cert,
                                 host=st.host), \
            auth.auth_required

    def info_fields(self):
        out = {}
        if self.settings.tls is not None:
            out["tls_required"] = True
            out["tls_available"] = True
        if self.settings.auth_override:
            out["auth_required"] = True
        return out


def check_upgrade_response(codec, head, key, compression, no_masking):
    """A hub's answer to our leaf upgrade request (nats-server wsDial's checks): None when it
    is a good 101 (the codec is set for compression and masking as agreed), else the error."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
    except (ValueError, IndexError):
        return "invalid websocket connection"
    headers = {}
    for line in lines[1:]:
        k, sep, v = line.partition(":")
        if sep:
            headers.setdefault(k.strip().lower(), []).append(v.strip())
    if (status != 101 or headers.get("upgrade", [""])[0].lower() != "websocket"
            or headers.get("connection", [""])[0].lower() != "upgrade"
            or headers.get("sec-websocket-accept", [""])[0] != _accept_key(key)):
        return "invalid websocket connection"
    codec.compress = False
    if compression:
        ext = " ".join(headers.get("sec-websocket-extensions", [])).lower()
        if "permessage-deflate" in ext:
            if "server_no_context_takeover" not in ext or "client_no_context_takeover" not in ext:
                return "compression negotiation error"
            codec.compress = True
    codec.mask_read = False                 # a server never masks
    codec.mask_write = not (no_masking and headers.get("nats-no-masking", [""])[0] == "true")
    return None


def _peer(c):
    st = c.state
    return "%s:%d" % (st.host, st.port)


def _accept_key(key):
    return base64.b64encode(sha1(key.encode() + WS_GUID).digest()).decode()


def _parse_request(head):
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("bad request line")
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if not sep:
            raise ValueError("bad header")
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    return parts[0], parts[1], headers


def _has_token(headers, name, value):
    for v in headers.get(name, []):
        for t in v.split(","):
            if t.strip(" \t").lower() == value.lower():
                return True
    return False


def _pmc_offered(headers):
    for v in headers.get("sec-websocket-extensions", []):
        for ext in v.split(","):
            for p in ext.split(";"):
                if p.strip(" \t").lower() == "permessage-deflate":
                    return True
    return False


def _host_port(tls, hostport):
    host, sep, port = hostport.rpartition(":")
    if not sep or "]" in port:
        return hostport.lower(), "443" if tls else "80"
    return host.lower(), port

