"""What JetStream asks of the core, registered once when the server starts: the core
(natsd/_core) knows no JetStream subject by name.

- Acks are one-off subjects, each published once: the sublist keeps no match of one in its
  cache, and keeps an ack's match under its first ACK_MEMO_TOKENS tokens instead
  (`$JS.ACK.<stream>.<consumer>.<delivered>...` against the consumer's
  `$JS.ACK.<stream>.<consumer>.>`), wherever the trie looks no deeper.
- A delivery that crosses a route, a leaf link or an import carries the subject it was stored
  under in its ack reply, `$JS.ACK.<8 tokens>@<subject>` (nats-server's jsAckDeliverIdx: names
  may hold '@', so only one after the eighth dot counts); the router splits it, so receivers
  see the stored subject and the plain ack reply.

These apply whether or not this server runs JetStream: a message a stream delivered elsewhere
can reach its clients through a route, a leaf link or an import.
"""
from natsd._core import router

ACK_PREFIX = b"$JS.ACK."
ACK_MEMO_TOKENS = 5
ACK_DELIVERY_DOTS = 8
ONE_OFF = (ACK_PREFIX, ACK_MEMO_TOKENS)     # for natsd._core.sublist.set_one_off_prefixes


def register():
    """Tell the router which replies carry a delivered subject (the server's start)."""
    router.set_delivery_replies(ACK_PREFIX, ACK_DELIVERY_DOTS)
