"""`$JS.API.ACCOUNT.PURGE.<account>`: the system account removes everything JetStream holds for
an account, as nats-server's jsLeaderAccountPurgeRequest (on a cluster its meta leader answers).

Only a request from the system account is answered (a `Nats-Request-Info` header names the
requester's account when it came through an import). Every stream of the account is deleted
with its consumers, then the account's directory in the store; the answer is
`account_purge_response` with `initiated`, also for an account that has nothing here. A name
with a path separator is refused. On a cluster the request goes to the meta leader
(natsd/jetstream/replicated/meta.py purge_account), which drops the account's streams on every
server and answers.
"""
import logging
import os
import shutil

from natsd._core.router import publish
from natsd.jetstream.engine import errors as E
from natsd.headers import request_info

log = logging.getLogger("natsd")

SUBJECT = "$JS.API.ACCOUNT.PURGE.*"
RESPONSE = "account_purge_response"


class AccountPurge:
    def __init__(self, engine):
        self.engine = engine                # natsd.jetstream.engine.jetstream.JetStream
        self.server = engine.server
        self.sub = None

    def start(self):
        self.sub = self.server.system.subscribe(SUBJECT, self._request)

    def _request(self, sub, subject, reply, hdr, payload, origin):
        if origin is None or self.engine.stopped:
            return
        requester = self._requester(hdr, origin)
        if requester is not self.server.accounts.system:
            return
        sys_sl = self.server.accounts.system.sublist
        name = bytes(subject).decode("utf-8", "replace").split(".")[4]
        if "/" in name or "\\" in name:
            self._answer(sys_sl, reply, E.error("JSStreamGeneralErrorF",
                                                err="account name can not contain path separators"))
            return
        acc = self.server.accounts.accounts.get(name)
        jsa = self.engine.jsas.get(name) if acc is not None else None
        meta = self.engine.meta
        if meta is not None:
            meta.purge_account(name, bytes(reply) if reply else None)
            return
        streams = sorted(jsa.streams) if jsa is not None else []
        log.info("Purge request for account %s (streams: %d, hasAccount: %s)",
                 name, len(streams), "true" if acc is not None else "false")
        for stream in streams:
            jsa.delete_stream(stream)
        if self.engine.store_dir:
            shutil.rmtree(os.path.join(self.engine.store_dir, name), ignore_errors=True)
        self._answer(sys_sl, reply, {"initiated": True})

    def _requester(self, hdr, origin):
        """The account a request comes from: its `Nats-Request-Info` (the service's account
        first), else the connection's; None for headers without one (not answered)."""
        ci = request_info(hdr)
        if ci is None:
            return None
        name = ci.get("service") or ci.get("acc")
        if name:
            return self.server.accounts.accounts.get(name)
        return getattr(origin.state, "account", None)

    @staticmethod
    def _answer(sublist, reply, payload):
        if reply:
            publish(sublist, bytes(reply), None, None, E.api_response(RESPONSE, payload))
