"""A new durable consumer's files (its directory, meta.json, the first state.json) are written
on worker threads when the disk makes new files slowly, and its create is answered once they
are (natsd/jetstream/engine/consumer.py write_new_files). These tests hold the promises around
that, with the threads always used (NATSD_NEW_FILES_US=0) and never (a threshold no disk
reaches): the answer comes before the first message the consumer delivers; what is asked of
the consumer while its files are written (an update, a delete) is on disk afterwards; a
consumer answered as created survives kill -9, a deleted one does not come back; many creates
at once all land. A bad NATSD_NEW_FILES_US stops natsd."""
import json
import os
import subprocess
import sys

import pytest

from tests.support.rawclient import RawClient

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(params=["threads", "loop"])
def js(request, natsd, tmp_path):
    """natsd(...) with JetStream in tmp_path/sd, its new consumer files on worker threads or
    on the loop; -> (factory, store dir)."""
    env = dict(os.environ, NATSD_NEW_FILES_US="0" if request.param == "threads" else "10000000")
    sd = str(tmp_path / "sd")
    return (lambda: natsd("-js", "-sd", sd, env=env)), sd

STREAM = b'{"name":"S","subjects":["s.>"]}'


def _create(name, **cfg):
    cfg = dict({"durable_name": name, "ack_policy": "explicit"}, **cfg)
    return b"$JS.API.CONSUMER.DURABLE.CREATE.S." + name.encode(), json.dumps(
        {"stream_name": "S", "config": cfg}).encode()


def _client(srv):
    c = RawClient(srv.port)
    c.connect()
    assert b'"error"' not in c.request(b"$JS.API.STREAM.CREATE.S", STREAM, timeout=5)
    return c


def _info(c, name):
    return json.loads(c.request(b"$JS.API.CONSUMER.INFO.S." + name.encode(), b"", timeout=5))


def _consumer_dir(sd, name):
    return os.path.join(sd, "jetstream", "$G", "streams", "S", "consumers", name)


def test_the_create_answer_comes_before_the_first_delivered_message(js):
    srv = js[0]()
    with _client(srv) as c:
        for i in range(5):
            c.request(b"s.%d" % i, b"m%d" % i, timeout=5)
        c.send(b"SUB deliver.here 9\r\n")
        subject, body = _create("P", deliver_subject="deliver.here")
        c.send(b"PUB %s _R.create %d\r\n%s\r\n" % (subject, len(body), body))
        first = c.read_line()
        assert first.startswith(b"MSG _R.create 1 "), first
        answer = json.loads(c.read_line())
        assert "error" not in answer, answer
        assert (answer["num_pending"], answer["delivered"]["consumer_seq"]) == (5, 0)
        assert c.read_line().startswith(b"MSG s.0 9 $JS.ACK.S.P.1.1.1.")


def test_an_update_and_a_delete_sent_with_the_create_are_on_disk_after_kill_9(js):
    start, sd = js
    srv = start()
    with _client(srv) as c:
        # each pair goes out in one write: the second request is taken while the first's
        # files may still be written
        reps = []
        for name in ("UPD", "DEL"):
            subject, body = _create(name)
            reps.append(c.send_request(subject, body))
            if name == "UPD":
                subject, body = _create(name, description="updated")
                reps.append(c.send_request(subject, body))
            else:
                reps.append(c.send_request(b"$JS.API.CONSUMER.DELETE.S.DEL", b""))
        answers = [json.loads(c.reply(r, 5)) for r in reps]
    assert [("error" in a) for a in answers] == [False] * 4, answers
    assert answers[3] == {"type": "io.nats.jetstream.api.v1.consumer_delete_response", "success": True}
    srv.kill()
    assert not os.path.exists(_consumer_dir(sd, "DEL"))
    srv = start()
    with RawClient(srv.port) as c:
        c.connect()
        assert _info(c, "UPD")["config"]["description"] == "updated"
        assert _info(c, "DEL")["error"]["err_code"] == 10014


def test_many_creates_at_once_all_survive_kill_9(js):
    start, sd = js
    srv = start()
    names = ["C%03d" % i for i in range(200)]
    with _client(srv) as c:
        reps = [c.send_request(*_create(n)) for n in names]
        answers = [c.reply(r, 10) for r in reps]
    assert all(a is not None and b'"error"' not in a for a in answers)
    srv.kill()
    srv = start()
    with RawClient(srv.port) as c:
        c.connect()
        got = json.loads(c.request(b"$JS.API.CONSUMER.NAMES.S", b"{}", timeout=5))
    assert sorted(got["consumers"]) == names
    assert got["total"] == len(names)


@pytest.mark.parametrize("bad", ["abc", "-5", "1.5", "", "10000001"])
def test_a_bad_new_files_setting_stops_natsd(bad):
    env = dict(os.environ, NATSD_NEW_FILES_US=bad,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "natsd", "-p", "-1"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr == "natsd: NATSD_NEW_FILES_US=%r: want whole microseconds from 0 to 10000000\n" % bad
