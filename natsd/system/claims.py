"""The account JWT services in the system account, as nats-server answers them.

Without an operator, updates are answered and change nothing: no JWT is trusted.

Every resolver takes account JWT updates on `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` (and the
older `$SYS.ACCOUNT.<key>.CLAIMS.UPDATE`). With the MEMORY resolver an update reaches only a
live account ("jwt update skipped" otherwise). The FULL and CACHE directory resolvers store
every update (applied to the account when it is live) and also serve
`$SYS.REQ.CLAIMS.UPDATE` (the key taken from the JWT), `$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`
(the JWT, or an empty message), `$SYS.REQ.CLAIMS.LIST` (the keys held), `$SYS.REQ.CLAIMS.PACK`
(`<key>|<jwt>` messages and an empty one to end, or only the empty one when the requester's
hash is ours) and `$SYS.REQ.CLAIMS.DELETE` (a generic JWT self-signed by the operator listing
`accounts`); an account their directory lacks is asked of the cluster's other servers with
CLAIMS.LOOKUP. A FULL resolver also asks CLAIMS.PACK with its store's hash every `interval`
(one responder of the cluster answers) and merges what comes back (newer JWTs only), so
members that missed an update catch up. Answers use nats-server's respondToUpdate envelope: `data` with code 200 and a
message, or `error` with code 500 and "<message> - <reason>".
"""
from __future__ import annotations

import logging
import threading
import time

from natsd.auth.jwt import claims
from natsd.auth import nkey
from natsd._core.sublist import Subscription
from natsd.cluster.interest import routes_listen
from natsd.gofmt import go_json
from natsd.auth.jwt.accounts import AccountJwtError
from natsd.auth.jwt.resolver import ResolverError

log = logging.getLogger("natsd")

INTEREST_WAIT = 0.05                    # seconds between two looks for the routes' responders
UPDATE_SUBJECTS = ("$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE", "$SYS.ACCOUNT.*.CLAIMS.UPDATE")


class ClaimServices:
    def __init__(self, system, accounts):
        self.system = system                # natsd.system.services.SystemServices
        self.accounts = accounts            # natsd.auth.jwt.accounts.JwtAccounts; None: no operator
        self.resolver = accounts.resolver if accounts is not None else None
        self.sync_timer = None

    def start(self):
        sub = self.system.subscribe
        if self.accounts is None:
            for subject in UPDATE_SUBJECTS:
                sub(subject, self._untrusted_update)
            return
        if not self.resolver.tracks_updates:
            for subject in UPDATE_SUBJECTS:
                sub(subject, self._memory_update)
            return
        for subject in UPDATE_SUBJECTS:
            sub(subject, self._keyed_update)
        sub("$SYS.REQ.CLAIMS.UPDATE", self._update)
        sub("$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP", self._lookup)
        sub("$SYS.REQ.CLAIMS.PACK", self._pack, queue="responder")
        sub("$SYS.REQ.CLAIMS.LIST", self._list)
        sub("$SYS.REQ.CLAIMS.DELETE", self._delete)
        self.resolver.ask_others = self.ask_others
        if self.resolver.kind == "FULL":
            server = self.system.server
            self.pack_inbox = self.system.new_inbox()
            sub(self.pack_inbox, self._merge)
            self.sync_timer = server.loop.call_later(self.resolver.interval, self._sync)
        log.info("Managing all jwt in exclusive directory %s", self.resolver.dir)

    def shutdown(self):
        if self.sync_timer is not None:
            self.sync_timer.cancel()

    # -- keeping the cluster's directories alike --

    def _sync(self):
        """Every `interval`: ask one pack responder (ourselves included) for what we lack."""
        ours = self.resolver.hash()
        log.debug("DirResolver - Checking store state: %s", ours.hex())
        self.system.publish("$SYS.REQ.CLAIMS.PACK", ours, reply=self.pack_inbox)
        self.sync_timer = self.system.server.loop.call_later(self.resolver.interval, self._sync)

    def _merge(self, sub, subject, reply, hdr, payload, origin):
        """A pack answer: `<key>|<jwt>` lines, stored when newer; empty ends the answer."""
        if not payload:
            log.debug("DirResolver - Merging finished and resulting in: %s", self.resolver.hash().hex())
            return
        before = self.resolver.hash()
        try:
            self.resolver.merge(bytes(payload).decode("utf-8", "replace"))
        except ResolverError as e:
            log.error("DirResolver - Merging resulted in error: %s", e)
        else:
            log.debug("DirResolver - Merging succeeded and changed %s to %s",
                      before.hex(), self.resolver.hash().hex())

    # -- asking the other servers --

    def ask_others(self, key, timeout):
        """Blocking, in a worker thread (never on the loop): the first JWT the cluster's servers
        answer `$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP` with, or None once every server (this
        one included) answered empty or `timeout` passed, as nats-server's fetch."""
        server = self.system.server
        routes = getattr(server.cluster, "routes", None) or {}
        if not routes:
            return None
        left = [len(routes) + 1]            # the others and our own responder
        found, done = [None], threading.Event()
        inbox = self.system.new_inbox().encode()

        def on_reply(sub, subject, reply, hdr, payload, origin):
            left[0] -= 1
            if payload:
                found[0] = bytes(payload).decode("utf-8", "replace")
                done.set()
            elif left[0] <= 0:
                done.set()
        reply_sub = Subscription(None, inbox, b"", None, on_reply)

        subject = "$SYS.REQ.ACCOUNT.%s.CLAIMS.LOOKUP" % key
        deadline = time.monotonic() + timeout / 2

        def send():
            if not routes_listen(self.system.account.sublist, subject.encode()) and time.monotonic() < deadline:
                # a server that just joined: its routes have not told it of their
                # responders yet (a request now would reach nobody)
                server.loop.call_later(INTEREST_WAIT, send)
                return
            self.system.account.sublist.insert(reply_sub)
            self.system.publish(subject, b"", reply=inbox)
        server.loop.call_soon_threadsafe(send)
        if not done.wait(timeout):
            log.warning("Account fetch failed: fetching jwt timed out")
        server.loop.call_soon_threadsafe(self.system.account.sublist.remove, reply_sub)
        return found[0]

    # -- answers --

    def _respond(self, reply, account, message, error=None):
        """nats-server's respondToUpdate: logged, then answered when there is a reply."""
        if error is None:
            log.debug("%s - %s" if account else "%s", *((message, account) if account else (message,)))
        elif account:
            log.error("%s - %s - %s", message, account, error)
        else:
            log.error("%s - %s", message, error)
        if not reply:
            return
        env = {"server": self.system.server_info()}
        if error is None:
            env["data"] = {"account": account, "code": 200, "message": message}
        else:
            env["error"] = {"account": account, "code": 500, "description": "%s - %s" % (message, error)}
        self.system.publish(reply, go_json(_omit_empty(env)))

    # -- updates --

    @staticmethod
    def _subject_key(subject):
        """The account key of `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` / `$SYS.ACCOUNT.<key>...`."""
        tokens = subject.decode("utf-8", "replace").split(".")
        if len(tokens) == 6:
            return tokens[3]
        if len(tokens) == 5:
            return tokens[2]
        return None

    def _checked(self, subject, reply, payload):
        """An update's account key and claims, or None once the update was answered with what
        is wrong with it."""
        key = self._subject_key(subject)
        if key is None:
            return None
        if not payload:
            self._respond(reply, key, "jwt update error", "request body is empty")
            return None
        try:
            ac = claims.decode_kind(payload.decode("utf-8", "replace"), "account")
        except claims.JwtError as e:
            self._respond(reply, key, "jwt update resulted in error", e)
            return None
        if ac.subject != key:
            self._respond(reply, key, "jwt update resulted in error", "subject does not match jwt content")
            return None
        return key, ac

    def _memory_update(self, sub, subject, reply, hdr, payload, origin):
        checked = self._checked(subject, reply, payload)
        if checked is None:
            return
        key, ac = checked
        if key not in self.accounts.claims:
            self._respond(reply, key, "jwt update skipped")
            return
        try:
            self.accounts.update(key, ac.token)
        except AccountJwtError as e:
            self._respond(reply, key, "jwt update resulted in error", e)
            return
        self.resolver.store(key, ac.token)
        self._respond(reply, key, "jwt updated")

    def _untrusted_update(self, sub, subject, reply, hdr, payload, origin):
        """No operator: no JWT is trusted. An account of the config named by the key is not
        changed ("account validation failed"); any other is not here ("jwt update skipped")."""
        checked = self._checked(subject, reply, payload)
        if checked is None:
            return
        key, _ = checked
        if key in self.system.server.accounts.accounts:
            self._respond(reply, key, "jwt update resulted in error", "account validation failed")
        else:
            self._respond(reply, key, "jwt update skipped")

    def _keyed_update(self, sub, subject, reply, hdr, payload, origin):
        key = self._subject_key(subject)
        if key is None:
            log.debug("DirResolver - jwt update skipped due to bad subject %r", subject.decode())
            return
        ac = self._decode(reply, payload)
        if ac is None:
            return
        if ac.subject != key:
            self._respond(reply, key, "jwt update resulted in error", "subject does not match jwt content")
            return
        self._save(reply, key, ac.token)

    def _update(self, sub, subject, reply, hdr, payload, origin):
        ac = self._decode(reply, payload)
        if ac is not None:
            self._save(reply, ac.subject, ac.token)

    def _decode(self, reply, payload):
        try:
            return claims.decode_kind(payload.decode("utf-8", "replace"), "account")
        except claims.JwtError as e:
            self._respond(reply, "n/a", "jwt update resulted in error", e)
            return None

    def _save(self, reply, key, token):
        try:
            self.resolver.save(key, token)
        except ResolverError as e:
            self._respond(reply, key, "jwt update resulted in error", e)
            return
        self._respond(reply, key, "jwt updated")

    # -- the directory's contents --

    def _lookup(self, sub, subject, reply, hdr, payload, origin):
        tokens = subject.decode("utf-8", "replace").split(".")
        if not reply or len(tokens) != 6:
            return
        token = self.resolver.held(tokens[3])
        if token is None:
            log.debug("DirResolver - Could not find account %r", tokens[3])
        self.system.publish(reply, (token or "").encode())

    def _pack(self, sub, subject, reply, hdr, payload, origin):
        if not reply:
            return
        if bytes(payload) != self.resolver.hash():
            for line in self.resolver.pack():
                self.system.publish(reply, line.encode())
        self.system.publish(reply, b"")

    def _list(self, sub, subject, reply, hdr, payload, origin):
        if not reply:
            return
        keys = self.resolver.keys()
        log.debug("list request responded with %d account ids", len(keys))
        self.system.publish(reply, go_json({"data": keys, "server": self.system.server_info()}))

    def _delete(self, sub, subject, reply, hdr, payload, origin):
        who, keys, error = "", [], None
        try:
            req = claims.decode(payload.decode("utf-8", "replace"))
        except claims.JwtError as e:
            error = e
        else:
            who = req.subject
            error = self._delete_refusal(req)
            keys = req.nats.get("accounts") if error is None else []
        if error is not None:
            self._respond(reply, "", "delete accounts request by %s failed" % who, error)
            return
        failed = []
        for key in keys:
            try:
                self.resolver.delete(key)
            except ResolverError as e:
                failed.append(str(e))
        if failed:
            self._respond(reply, "", "deleted %d accounts, failed for %d" % (len(keys) - len(failed), len(failed)),
                          "\n".join(failed))
        else:
            self._respond(reply, "", "deleted %d accounts" % len(keys))

    def _delete_refusal(self, req):
        """Why a delete request is refused (nats-server's texts), or None."""
        if not self.resolver.delete_mode:
            return "delete must be enabled in server config"
        if req.subject != req.issuer:
            return "not self signed"
        if req.issuer not in self.accounts.trusted:
            return "not trusted"
        keys = req.nats.get("accounts")
        if not isinstance(keys, list):
            return "malformed request"
        system = self.system.account.name if self.system.account is not None else ""
        for key in keys:
            if not isinstance(key, str) or not nkey.is_valid_public(key, nkey.ACCOUNT):
                return "malformed request"
            if key == system:
                return "not allowed to delete system account"
        return None


def _omit_empty(env):
    """`account` is omitempty in nats-server's update answers."""
    for part in ("data", "error"):
        if part in env and not env[part].get("account"):
            del env[part]["account"]
    return env
