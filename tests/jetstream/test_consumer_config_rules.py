"""The cross-field rules of a consumer's configuration (nats-server's checkConsumerCfg and
setConsumerConfigDefaults), natsd against nats-server 2.15.1: each create request, valid or
not, gets the same answer (its error, or the created consumer's configuration)."""
from tests.support.jetstream import api, compared_on_both

NS = 1_000_000_000
PUSH = {"deliver_subject": "push.out"}

CASES = [
    {"flow_control": True, **PUSH},                                 # without heartbeats
    {"flow_control": True, "idle_heartbeat": NS, **PUSH},
    {"idle_heartbeat": NS},                                         # on a pull consumer
    {"max_waiting": 5, **PUSH},
    {"max_batch": 5, **PUSH},
    {"max_expires": NS, **PUSH},
    {"max_bytes": 100, **PUSH},
    {"rate_limit_bps": 1000},                                       # on a pull consumer
    {"deliver_group": "g"},                                         # no deliver subject
    {"ack_policy": "none", "max_ack_pending": 10},
    {"ack_policy": "explicit", "backoff": [NS, 2 * NS], "max_deliver": 2},
    {"ack_policy": "explicit", "backoff": [NS, 2 * NS], "max_deliver": 5, "ack_wait": 5 * NS},
    {"inactive_threshold": -1},
    {"max_request_expires": NS // 2000},
    {"deliver_policy": "by_start_sequence"},                        # no start sequence
    {"deliver_policy": "all", "opt_start_seq": 5},
    {"deliver_policy": "by_start_time"},
    {"filter_subject": "c.a", "filter_subjects": ["c.b"]},
    {"filter_subjects": ["c.a", "c.a"]},
    {"filter_subjects": ["c.a", "c.>"]},
    {"max_deliver": 0},
    {"max_deliver": -5},
    {"num_replicas": 3},
    {"headers_only": True, **PUSH},
    {"priority_policy": "pinned_client"},                           # no priority groups
    {"priority_policy": "overflow", "priority_groups": ["A"]},
]


@compared_on_both
async def test_consumer_create_rules(nc, js):
    await api(nc, "$JS.API.STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"]})
    seen = []
    for i, case in enumerate(CASES):
        name = "D%d" % i
        r = await api(nc, "$JS.API.CONSUMER.CREATE.C." + name,
                      {"stream_name": "C", "config": {"durable_name": name, **case}})
        if "error" in r:
            seen.append((case, r["error"]))
        else:
            cfg = r["config"]
            seen.append((case, {k: cfg.get(k) for k in sorted(case)}))
            await api(nc, "$JS.API.CONSUMER.DELETE.C." + name)
    return seen
