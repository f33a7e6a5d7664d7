"""`/subsz` and `$SYS.REQ.SERVER.PING.SUBSZ`: sublist statistics and (optionally) the subscriptions.

As nats-server's `Server.Subsz`: statistics are summed over accounts (or the one `acc`);
`subs=1` lists the subscriptions of this server's clients, its internal clients' included
(the system client's services, each account's imports from the system account, JetStream's
API), filtered by `test=<literal subject>` and paged by offset/limit. `total` is only counted
when the list is asked for.

Sublist figures not tracked by natsd's Sublist (cache fan-out) are reported as 0.
"""
import time
from dataclasses import dataclass

from natsd.monitor import params as P
from natsd.monitor.connz import sub_detail
from natsd.protocol import KIND_CLIENT
from natsd.subject import is_valid_literal_subject, subject_matches

DEFAULT_LIMIT = 1024


@dataclass
class SubszOptions:
    offset: int = 0
    limit: int = 0
    subscriptions: bool = False
    account: str = ""                   # query "acc", JSON "account"
    test: str = ""


def options_from_query(q):
    return SubszOptions(subscriptions=P.q_bool(q, "subs"), offset=P.q_int(q, "offset"),
                        limit=P.q_int(q, "limit"), test=P.q_str(q, "test"),
                        account=P.q_str(q, "acc"))


def options_from_json(body):
    b, S = P.j_body(body), "SubszOptions"
    return SubszOptions(offset=P.j_int(b, "offset", S), limit=P.j_int(b, "limit", S),
                        subscriptions=P.j_bool(b, "subscriptions", S),
                        account=P.j_str(b, "account", S), test=P.j_str(b, "test", S))


class SublistStats:
    """nats-server's SublistStats, summed over sublists with `add`."""

    def __init__(self):
        self.num_subs = self.num_cache = self.inserts = self.removes = 0
        self.matches = self.cache_hits = 0
        self.max_fanout = 0
        self.tot_fanout = self.cache_cnt = 0

    @classmethod
    def of(cls, sl):
        st = cls()
        st.add_sublist(sl)
        return st

    def add_sublist(self, sl):
        self.num_subs += sl.count
        size = getattr(sl, "cache_size", None)
        self.num_cache += size() if callable(size) else 0
        self.inserts += sl.inserts
        self.removes += sl.removes
        self.matches += sl.matches
        self.cache_hits += sl.cache_hits
        fanout = getattr(sl, "cache_fanout", None)      # (total, max, entries) when offered
        if callable(fanout):
            tot, mx, cnt = fanout()
            self.tot_fanout += tot
            self.cache_cnt += cnt
            self.max_fanout = max(self.max_fanout, mx)

    def to_json(self):
        return {
            "num_subscriptions": self.num_subs,
            "num_cache": self.num_cache,
            "num_inserts": self.inserts,
            "num_removes": self.removes,
            "num_matches": self.matches,
            "cache_hit_rate": self.cache_hits / self.matches if self.matches else 0,
            "max_fanout": self.max_fanout,
            "avg_fanout": self.tot_fanout / self.cache_cnt if self.tot_fanout else 0,
        }


def local_subscriptions(account):
    """(subscription, cid) for each subscription of an account held by a client of this
    server, as nats-server's localSubs: its client connections' and its internal clients'
    (the system client, an account's import client). Interest of routes and leaf nodes, and
    internal subscriptions of no internal client, are left out."""
    out = []
    for s in account.sublist.all_subscriptions():
        c = s.conn
        if c is None:
            if s.owner is not None:
                out.append((s, s.owner.cid))
        elif c.kind == KIND_CLIENT:
            out.append((s, c.cid))
    return out


def handler(server, opts):
    offset = max(opts.offset, 0)
    limit = opts.limit if opts.limit > 0 else DEFAULT_LIMIT
    test = opts.test
    if test and not is_valid_literal_subject(test):
        raise P.OptionsError("invalid test subject, must be valid publish subject: %s" % test)
    stats = SublistStats()
    accounts = [a for a in server.accounts if not opts.account or a.name == opts.account]
    for acc in accounts:
        stats.add_sublist(acc.sublist)
        stats.num_subs -= acc.gateway_subs      # other clusters' interest is not counted
    out = {"server_id": server.id, "now": P.now_rfc3339(time.time())}
    out.update(stats.to_json())
    out.update({"total": 0, "offset": offset, "limit": limit})
    if opts.subscriptions:
        details = []
        for acc in accounts:
            for s, cid in local_subscriptions(acc):
                if test and not subject_matches(s.subject.decode("utf-8", "replace"), test):
                    continue
                details.append(sub_detail(s, cid, acc.name))
        out["total"] = len(details)
        page = P.paginate(details, offset, limit)
        if page:
            out["subscriptions_list"] = page
    return out
