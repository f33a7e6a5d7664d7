"""The Cython core calls Python only through ProtocolHandler's declared methods.

Every `handler.<name>(` in natsd/_core/*.pyx must be declared on natsd.protocol.ProtocolHandler
(with a docstring), every connection kind's handler must implement it with the declared
parameters, and every call in the router (the delivery path) must be a method marked
@per_message."""
import inspect
import re
from pathlib import Path

from natsd.client import ClientProtocol
from natsd.cluster.routeproto import RouteProtocol
from natsd.leafnodes.leafnode import LeafProtocol
from natsd.protocol import ProtocolHandler

CORE = Path(__file__).resolve().parents[2] / "natsd" / "_core"
CALL = re.compile(r"\bhandler\.([A-Za-z_]\w*)\(")
KINDS = (ClientProtocol, RouteProtocol, LeafProtocol)


def core_calls(pattern="*.pyx"):
    calls = {}
    for f in sorted(CORE.glob(pattern)):
        for name in CALL.findall(f.read_text()):
            calls.setdefault(name, set()).add(f.name)
    return calls


def test_the_core_calls_python_through_handlers():
    calls = core_calls()
    assert len(calls) > 30 and {"sub", "connect", "publish_mapped"} <= set(calls)


def test_every_core_call_is_declared():
    undeclared = {n: sorted(fs) for n, fs in core_calls().items()
                  if not inspect.isfunction(getattr(ProtocolHandler, n, None))}
    assert undeclared == {}
    missing_docs = [n for n in core_calls() if not getattr(ProtocolHandler, n).__doc__]
    assert missing_docs == []


def test_implementations_keep_the_declared_parameters():
    wrong = []
    for name in core_calls():
        declared = list(inspect.signature(getattr(ProtocolHandler, name)).parameters)
        for kind in KINDS:
            impl = getattr(kind, name)
            if impl is getattr(ProtocolHandler, name):
                continue
            got = list(inspect.signature(impl).parameters)
            if got != declared:
                wrong.append((kind.__name__, name, got, declared))
    assert wrong == []


def test_delivery_path_calls_are_marked_per_message():
    unmarked = [n for n in core_calls("router.pyx")
                if not getattr(getattr(ProtocolHandler, n), "per_message", False)]
    assert unmarked == []
    # and each kind's override keeps being the per-message method (the mark is on the
    # declaration; a kind cannot turn a per-message call into a control one)
    marked = {n for n in core_calls() if getattr(getattr(ProtocolHandler, n), "per_message", False)}
    assert {"publish_mapped", "remote_message", "delivery_denied", "allow_reply"} <= marked
    assert not marked & {"connect", "sub", "unsub", "info", "close"}
