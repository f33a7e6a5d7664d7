"""The stream operations of the API that change a stream, apart from publishing: purge,
message delete and (for replicated streams) a configuration update. The API runs them on a one-replica stream at once; a replicated
stream runs them on every replica when its group commits them (natsd/jetstream/replicated/streams.py),
so every copy changes the same way. Each takes the decoded request and returns the reply's
fields or raises ApiError, with nats-server's errors."""
from natsd.jetstream.engine import errors as E


def purge(st, req):
    if st.config.get("sealed"):
        raise E.error("JSStreamSealedErr")
    if st.config.get("deny_purge"):
        raise E.error("JSStreamPurgeFailedF", err="stream purge not permitted")
    # nats-server hands any filter to PurgeEx, which purges what matches it (an invalid
    # subject like "a..b" matches nothing stored from a valid publish)
    n = st.purge(req.get("filter", "") or None, req.get("seq", 0), req.get("keep", 0))
    return {"success": True, "purged": n}


def msg_delete(st, req):
    if st.config.get("sealed"):
        raise E.error("JSStreamSealedErr")
    if st.config.get("deny_delete"):
        raise E.error("JSStreamMsgDeleteFailedF", err="message delete not permitted")
    seq = req.get("seq", 0)
    if st.config.get("storage", "file") != "memory":
        # nats-server's file store: errors for a sequence outside the stream, none for one
        # deleted inside it (the memory store never errors)
        state = st.store.state()
        if seq == 0 or seq < state["first_seq"] or seq > state["last_seq"] or not state["messages"]:
            raise E.error("JSStreamMsgDeleteFailedF",
                          err="stream store EOF" if seq > state["last_seq"] else "no message found")
    if not st.delete_msg(seq, not req.get("no_erase", False)):
        raise E.error("JSSequenceNotFoundErrF", seq=seq)
    return {"success": True}


def update(st, req):
    """A checked configuration (natsd/jetstream/engine/api.py checks it on the leader first)."""
    st.update_config(req["config"])
    return st.info()


OPS = {"purge": (purge, "stream_purge_response"), "msg_delete": (msg_delete, "stream_msg_delete_response"),
       "update": (update, "stream_update_response")}
