"""`/stacksz`: the stack of every thread (nats-server dumps its goroutines' stacks), as text
with nats-server's content type."""
import sys
import threading
import traceback
from dataclasses import dataclass


@dataclass
class StackszOptions:
    pass


def options_from_query(q):
    return StackszOptions()


def options_from_json(body):
    return StackszOptions()


def stacks():
    names = {t.ident: t.name for t in threading.enumerate()}
    current = threading.get_ident()
    out = []
    for ident, frame in sys._current_frames().items():
        state = "running" if ident == current else "waiting"
        out.append("thread %d [%s, %s]:\n%s" % (ident, names.get(ident, "?"), state,
                                                "".join(traceback.format_stack(frame))))
    return "\n".join(out)


def handler(server, opts):
    return 200, stacks().encode(), "application/json"
