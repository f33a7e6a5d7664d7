"""The client suites can fail: each probe gives another transcript on a server without
JetStream than on one with it."""
import pytest


@pytest.mark.parametrize("client", ["natsjs", "natsc"])
def test_a_probe_tells_servers_apart(client, request, natsd, tmp_path):
    probe = request.getfixturevalue(client)
    with_js = probe(natsd("-js", "-sd", str(tmp_path / "a")).url, "jetstream")
    without = probe(natsd().url, "jetstream")
    assert with_js[0]["ok"]["acks"][0] == {"stream": "JS1", "seq": 1, "duplicate": False}
    assert "error" in without[0] and without != with_js
