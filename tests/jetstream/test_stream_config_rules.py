"""The cross-field rules of a stream's configuration (nats-server's jsStreamCreateRequest and
checkStreamCfg), natsd against nats-server 2.15.1: each create request, valid or not, gets the
same answer (its error code and description, or the created stream's configuration)."""
from tests.support.jetstream import api, compared_on_both

NS = 1_000_000_000

CASES = [
    {"mirror_direct": True},                                        # no mirror (10052)
    {"mirror_direct": True, "mirror": None},
    {"mirror_direct": False},
    {"sealed": True},
    {"discard_new_per_subject": True},                              # without discard new
    {"discard_new_per_subject": True, "discard": "new"},            # without max per subject
    {"discard_new_per_subject": True, "discard": "new", "max_msgs_per_subject": 1},
    {"allow_msg_counter": True, "discard": "new"},
    {"allow_msg_counter": True, "allow_msg_ttl": True},
    {"allow_msg_counter": True, "retention": "workqueue"},
    {"subject_delete_marker_ttl": NS},                              # without message TTLs
    {"subject_delete_marker_ttl": NS, "allow_msg_ttl": True},       # without roll-ups
    {"subject_delete_marker_ttl": NS, "allow_msg_ttl": True, "allow_rollup_hdrs": True},
    {"subject_delete_marker_ttl": NS // 2, "allow_msg_ttl": True, "allow_rollup_hdrs": True},
    {"allow_msg_schedules": True, "discard": "new"},
    {"allow_msg_schedules": True},                                  # without roll-ups
    {"max_age": NS // 20},
    {"max_age": 10 * NS, "duplicate_window": 20 * NS},
    {"duplicate_window": NS // 20},
    {"deny_purge": True, "allow_rollup_hdrs": True},
]


@compared_on_both
async def test_stream_create_rules(nc, js):
    seen = []
    for i, case in enumerate(CASES):
        name = "C%d" % i
        r = await api(nc, "$JS.API.STREAM.CREATE." + name,
                      {"name": name, "subjects": ["c%d.>" % i], **case})
        if "error" in r:
            seen.append((case, r["error"]))
        else:
            cfg = r["config"]
            seen.append((case, {k: cfg.get(k) for k in sorted(case)}))
            await api(nc, "$JS.API.STREAM.DELETE." + name)
    return seen
