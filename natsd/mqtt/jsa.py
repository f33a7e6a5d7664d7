"""JetStream requests that MQTT makes for one account, as nats-server's mqttJSA makes them: a
request into the account (`$JS.API...` or a stream subject) with a reply subject under
`$MQTT.JSA.<server hash>.<kind>.<token>`, the answer handed to a callback. Going through the
account's subjects (not the engine's objects) is what lets a clustered stream's leader answer
from another server, and what nats-server does."""
from __future__ import annotations

import json
import logging
from time import monotonic

from natsd._core.router import publish
from natsd._core.sublist import Subscription

log = logging.getLogger("natsd")

REPLIES_PREFIX = "$MQTT.JSA."
API_TIMEOUT = 5.0                       # nats-server's mqttDefaultJSAPITimeout

# the request kinds, the reply subject's fourth token (nats-server's mqttJSA* constants)
STREAM_CREATE = "SC"
STREAM_UPDATE = "SU"
STREAM_LOOKUP = "SL"
STREAM_DELETE = "SD"
STREAM_NAMES = "SN"
CONSUMER_CREATE = "CC"
CONSUMER_DELETE = "CD"
MSG_STORE = "MS"
MSG_LOAD = "ML"
MSG_DELETE = "MD"
SESSION_PERSIST = "SP"


class JsApiError(Exception):
    """An error answer of the JetStream API (code, err_code, description)."""

    def __init__(self, error: dict):
        self.code = error.get("code", 0)
        self.err_code = error.get("err_code", 0)
        self.description = error.get("description", "")
        super().__init__(self.description)


class JsTimeout(Exception):
    def __init__(self):
        super().__init__("timeout for request type %r" % "JS API")


class Jsa:
    """The JetStream client of one account's MQTT sessions."""

    def __init__(self, server, account, server_hash: str, domain: str = ""):
        self.server = server
        self.account = account
        self.id = server_hash
        self.domain = domain
        self.prefix = REPLIES_PREFIX + server_hash + "."
        # reply subject -> (callback, deadline, whether the answer is decoded), oldest first:
        # one timer for all of them (_sweep), not one per request
        self.waiting: dict[bytes, tuple] = {}
        self.sweeper = None
        self.next_token = 0
        self.timeout = API_TIMEOUT
        self.sub = Subscription(None, (self.prefix + ">").encode(), b"", None, self._answer)
        owner = account.internal_client
        if owner is not None:
            self.sub.owner = owner
            self.sub.sid = owner.next_sid()
        account.sublist.insert(self.sub)

    def close(self):
        self.sub.closed = True
        self.account.sublist.remove(self.sub)
        if self.sweeper is not None:
            self.sweeper.cancel()
            self.sweeper = None
        self.waiting.clear()

    def api(self, kind: str, subject: str, body, done, hdr: bytes | None = None,
            client_hash: str = "", decoded: bool = True):
        """A request to `subject` (a `$JS.API.` one gets the domain prefix); done(answer, error)
        with the decoded JSON answer (its bytes when not `decoded`: an error is still found),
        or an error: JsApiError, JsTimeout."""
        if subject.startswith("$JS.API.") and self.domain:
            subject = "$JS.%s.API.%s" % (self.domain, subject[len("$JS.API."):])
        self.next_token += 1
        reply = ("%s%s.%s%d" % (self.prefix, kind, client_hash + "." if client_hash else "",
                                self.next_token)).encode()
        self.waiting[reply] = (done, monotonic() + self.timeout, decoded)
        self.arm()
        payload = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        publish(self.account.sublist, subject.encode(), reply, hdr, payload)

    def send(self, subject: str, payload: bytes = b"", hdr: bytes | None = None):
        """A message with no answer wanted (acks to consumers)."""
        publish(self.account.sublist, subject.encode(), None, hdr, payload)

    def reply_base(self, kind: str) -> bytes:
        """The reply subjects of `kind` without their token (the core's QoS 1 runs count
        the tokens on from next_token, and note their waiting entries themselves)."""
        return (self.prefix + kind + ".").encode()

    def arm(self):
        """Requests wait: the timer that times them out runs."""
        if self.sweeper is None:
            self.sweeper = self.server.loop.call_later(self.timeout, self._sweep)

    def _sweep(self):
        """The requests whose time is up get JsTimeout; the timer is set for the next."""
        self.sweeper = None
        now = monotonic()
        late = []
        for reply, (_, deadline, _) in self.waiting.items():
            if deadline > now:
                break
            late.append(reply)
        for reply in late:
            self.waiting.pop(reply)[0](None, JsTimeout())
        if self.waiting:
            first = next(iter(self.waiting.values()))[1]
            self.sweeper = self.server.loop.call_later(max(0.001, first - now), self._sweep)

    def _answer(self, sub, subject, reply, hdr, payload, origin=None):
        entry = self.waiting.pop(bytes(subject), None)
        if entry is None:
            return
        done, _, decoded = entry
        if not decoded and b'"error"' not in payload:
            done(bytes(payload), None)  # a PubAck nobody reads but for its error
            return
        try:
            answer = json.loads(payload) if payload else {}
        except ValueError:
            done(None, JsApiError({"description": "invalid JSON answer"}))
            return
        error = answer.get("error") if isinstance(answer, dict) else None
        if error:
            done(None, JsApiError(error))
        else:
            done(answer, None)

    # ---- the calls MQTT makes ----

    def create_stream(self, config: dict, done):
        self.api(STREAM_CREATE, "$JS.API.STREAM.CREATE." + config["name"], config, done)

    def update_stream(self, config: dict, done):
        self.api(STREAM_UPDATE, "$JS.API.STREAM.UPDATE." + config["name"], config, done)

    def delete_stream(self, name: str, done):
        self.api(STREAM_DELETE, "$JS.API.STREAM.DELETE." + name, b"", done)

    def stream_names(self, done):
        self.api(STREAM_NAMES, "$JS.API.STREAM.NAMES", b"", done)

    def lookup_stream(self, name: str, done):
        self.api(STREAM_LOOKUP, "$JS.API.STREAM.INFO." + name, b"", done)

    def delete_consumer(self, stream: str, name: str, done):
        self.api(CONSUMER_DELETE, "$JS.API.CONSUMER.DELETE.%s.%s" % (stream, name), b"", done)

    def store(self, subject: str, hdr: bytes | None, payload: bytes, done, kind=MSG_STORE,
              client_hash: str = "", decoded: bool = True):
        """Publish into a stream and wait for its PubAck (done(ack, error); not `decoded`: its
        bytes). A session record names its client id hash in the reply subject, for the other
        servers to see."""
        self.api(kind, subject, payload, done, hdr=hdr, client_hash=client_hash, decoded=decoded)

    def load_last(self, stream: str, subject: str, done):
        self.api(MSG_LOAD, "$JS.API.STREAM.MSG.GET." + stream, {"last_by_subj": subject}, done)

    def load_next(self, stream: str, subject: str, done):
        self.api(MSG_LOAD, "$JS.API.STREAM.MSG.GET." + stream, {"next_by_subj": subject}, done)

    def delete_msg(self, stream: str, seq: int, done):
        self.api(MSG_DELETE, "$JS.API.STREAM.MSG.DELETE." + stream, {"seq": seq, "no_erase": True}, done)

    def set_timeout(self, seconds: float):
        self.timeout = seconds
