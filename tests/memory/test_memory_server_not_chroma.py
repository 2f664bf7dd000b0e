"""A memory_url whose server answers every path with 200 but is not Chroma (a web
application's catch-all page, a proxy's sign-in page) is taken for a server that is down; so
is one whose later answers are not Chroma's (a proxy's 502 page once its backend is gone)."""

from __future__ import annotations

import json

import httpx
import orjson
import pytest
from chromadb.api.base_http_client import BaseHTTPClient

from agent_cli.core.errors import MemoryUnavailable
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.place import ChromaServer
from agent_cli.memory.longterm.store import Store
from agent_cli.memory.longterm.write.outbox import Outbox
from conftest import DOCTOR_REPLIES
from embedkit import HashEmbedder
from episodekit import episode
from httpkit import chroma_until_opened, loopback, send

__all__ = ["loopback"]  # the fixture, used by name

PAGE = "<!doctype html><html><body>Sign in to continue</body></html>"
BAD_GATEWAY = (
    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>"
    "</center><hr><center>nginx</center></body></html>"
)


@pytest.fixture
def web_page(loopback) -> ChromaServer:
    """A server that answers every request with the same HTML page and status 200."""
    url = loopback(lambda handler: send(handler, PAGE, "text/html"))
    return ChromaServer(url.removesuffix("/v1"), timeout_s=2)


@pytest.fixture
def json_not_chroma(loopback) -> ChromaServer:
    """A server that answers every request with 200 and a JSON object that is not Chroma's."""
    body = json.dumps({"status": "ok"})
    url = loopback(lambda handler: send(handler, body, "application/json"))
    return ChromaServer(url.removesuffix("/v1"), timeout_s=2)


@pytest.fixture
def bad_gateway(loopback) -> ChromaServer:
    """A Chroma server behind a proxy whose backend went down once the client was made: every
    collection request gets nginx's 502 page."""
    url = loopback(chroma_until_opened(lambda h: send(h, BAD_GATEWAY, "text/html", 502)))
    return ChromaServer(url.removesuffix("/v1"), timeout_s=2)


@pytest.mark.parametrize("server", ["web_page", "json_not_chroma"])
def test_a_server_that_answers_everything_is_said_not_to_be_chroma(server, request):
    with pytest.raises(MemoryUnavailable) as e:
        LongTermMemory(request.getfixturevalue(server), HashEmbedder())
    line = e.value.one_line()
    assert "does not answer like a Chroma server" in line
    assert "/api/v2/heartbeat is not Chroma's" in line
    assert "JSON" not in line  # chromadb's own complaint names nothing to fix


@pytest.fixture
def failing(loopback) -> ChromaServer:
    """A Chroma server that opened, then fails each collection request with its own error (a
    500 InternalError: its database is locked)."""
    body = json.dumps({"error": "InternalError", "message": "database is locked"})
    url = loopback(chroma_until_opened(lambda h: send(h, body, "application/json", 500)))
    return ChromaServer(url.removesuffix("/v1"), timeout_s=2)


@pytest.mark.parametrize("server", ["web_page", "bad_gateway", "failing"])
def test_a_run_goes_on_without_it_and_keeps_what_it_learns(server, request, tmp_path):
    where: ChromaServer = request.getfixturevalue(server)
    notices: list[str] = []
    outbox = Outbox(tmp_path / "memory-outbox.jsonl", str(where))
    lazy = LazyLongTermMemory(where, HashEmbedder())
    memory = FallbackLongTerm(lambda: lazy, notices.append, outbox=outbox)
    memory.prepare()
    assert list(memory.recall("retry with backoff")) == []
    memory.add_episode(episode("20250314-090000-aaaa", "Retry the upload with backoff"))
    memory.close()
    assert len(notices) == 1
    assert "goes on without it" in notices[0] and "<" not in notices[0]
    said = {
        "web_page": "does not answer like a Chroma server",
        "bad_gateway": "HTTP 502",
        "failing": "database is locked (see the server's log; it may answer again later)",
    }
    assert said[server] in notices[0]
    kept = [json.loads(line) for line in outbox.path.read_text().splitlines()]
    assert [k["op"] for k in kept] == ["add_episode"]


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (502, BAD_GATEWAY, "HTTP 502 Bad Gateway"),
        (503, "Service Unavailable: the backend restarts", "HTTP 503 Service Unavailable"),
        (404, "<html>Not Found</html>", "HTTP 404 Not Found"),  # another web server on its port
    ],
)
def test_chromadbs_report_of_an_answer_not_chromas_is_an_outage_in_one_line(status, body, said):
    store = Store(ChromaServer("http://127.0.0.1:9"), HashEmbedder())
    reply = httpx.Response(status, text=body, request=httpx.Request("POST", "http://x/upsert"))
    with pytest.raises(MemoryUnavailable) as e, store.guard("writing"):
        BaseHTTPClient._raise_chroma_error(reply)  # what chromadb's client raises for it
    line = e.value.one_line()
    assert f"writing failed: it answered {said} with a body that is not Chroma's" in line
    assert "<" not in line and body not in line and "\n" not in line
    with pytest.raises(MemoryUnavailable, match="a body that is not JSON"), store.guard("reading"):
        orjson.loads(PAGE)  # what chromadb's client raises for a 200 that is not JSON


def test_an_error_of_our_own_is_not_taken_for_an_outage():
    store = Store(ChromaServer("http://127.0.0.1:9"), HashEmbedder())
    with pytest.raises(Exception, match="^a bug of ours$") as e, store.guard("writing"):
        raise Exception("a bug of ours")
    assert type(e.value) is Exception
    with pytest.raises(Exception, match="^another$") as e, store.guard("writing"):
        try:
            {}["missing"]
        except KeyError:
            raise Exception("another") from None
    assert type(e.value) is Exception


def test_commands_and_doctor_say_an_error_page_in_one_line(
    bad_gateway, agent_in_process, fake_server, scratch_repo
):
    env = {"AGENT_MEMORY_URL": bad_gateway.url, "OPENAI_API_KEY": "sk-doctor-test-key-1234567890"}
    recall = agent_in_process("recall", "retry", cwd=scratch_repo, env=env)
    lines = [line for line in recall.stderr.splitlines() if line.strip()]
    assert recall.returncode == 1 and len(lines) == 1, recall.stderr
    assert f"memory server {bad_gateway.url}" in lines[0] and "HTTP 502 Bad Gateway" in lines[0]
    assert "internal error" not in lines[0] and "<" not in lines[0]
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    doctor = agent_in_process("doctor", "--base-url", srv.url, cwd=scratch_repo, env=env)
    assert doctor.returncode == 1 and not doctor.stderr.strip(), doctor.stderr
    said = [line.split(maxsplit=2) for line in doctor.stdout.splitlines()]
    rows = {words[1]: words[0] for words in said if words[:1] in (["ok"], ["FAIL"])}
    memory = next(" ".join(words) for words in said if words[:2] == ["FAIL", "memory"])
    assert "HTTP 502 Bad Gateway" in memory and "<" not in memory
    assert {"git", "hooks", "instructions"} <= set(rows)  # the checks after it still ran
    assert [name for name, status in rows.items() if status == "FAIL"] == ["memory"]
