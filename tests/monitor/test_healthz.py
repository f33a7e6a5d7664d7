"""`/healthz` on a single JetStream server, natsd against nats-server: the same status and body
for the health of the server, of an account, a stream and a consumer that are there or not,
with and without `details`, and for the requests it refuses."""
import asyncio

import nats
import pytest

from tests.support.servers import http_status_json

PATHS = ["/healthz", "/healthz?details=true", "/healthz?js-enabled-only=true", "/healthz?js-server-only=true",
         "/healthz?account=%24G", "/healthz?account=%24G&stream=S", "/healthz?account=%24G&stream=S&consumer=D",
         "/healthz?account=NOPE", "/healthz?account=NOPE&details=true", "/healthz?account=%24G&stream=NOPE",
         "/healthz?account=%24G&stream=NOPE&details=true", "/healthz?account=%24G&stream=S&consumer=NOPE",
         "/healthz?account=%24G&stream=S&consumer=NOPE&details=true", "/healthz?stream=S",
         "/healthz?stream=S&details=true", "/healthz?account=%24G&consumer=D",
         "/healthz?account=%24G&consumer=D&details=true"]


async def _assets(url):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"])
    await js.add_consumer("S", durable_name="D")
    await nc.close()


@pytest.fixture
def answers(natsd, reference, tmp_path):
    out = {}
    for kind, start in (("nats-server", reference), ("natsd", natsd)):
        srv = start("-js", "-sd", str(tmp_path / kind), "-m", "-1")
        asyncio.run(_assets(srv.url))
        out[kind] = {p: http_status_json(srv.http_port, p) for p in PATHS}
    return out


def test_health_checks_answer_as_nats_server(answers):
    for path in PATHS:
        assert answers["natsd"][path] == answers["nats-server"][path], path
    assert answers["natsd"]["/healthz?account=%24G&stream=NOPE"][0] == 404
