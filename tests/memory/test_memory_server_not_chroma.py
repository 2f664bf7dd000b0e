"""A memory_url whose server answers every path with 200 but is not Chroma (a web
application's catch-all page, a proxy's sign-in page) is taken for a server that is down."""

from __future__ import annotations

import json

import pytest

from agent_cli.core.errors import MemoryUnavailable
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.place import ChromaServer
from agent_cli.memory.longterm.write.outbox import Outbox
from embedkit import HashEmbedder
from episodekit import episode
from httpkit import loopback, send

__all__ = ["loopback"]  # the fixture, used by name

PAGE = "<!doctype html><html><body>Sign in to continue</body></html>"


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


@pytest.mark.parametrize("server", ["web_page", "json_not_chroma"])
def test_a_server_that_answers_everything_is_said_not_to_be_chroma(server, request):
    with pytest.raises(MemoryUnavailable) as e:
        LongTermMemory(request.getfixturevalue(server), HashEmbedder())
    line = e.value.one_line()
    assert "does not answer like a Chroma server" in line
    assert "/api/v2/heartbeat is not Chroma's" in line
    assert "JSON" not in line  # chromadb's own complaint names nothing to fix


def test_a_run_goes_on_without_it_and_keeps_what_it_learns(web_page, tmp_path):
    notices: list[str] = []
    outbox = Outbox(tmp_path / "memory-outbox.jsonl", str(web_page))
    lazy = LazyLongTermMemory(web_page, HashEmbedder())
    memory = FallbackLongTerm(lambda: lazy, notices.append, outbox=outbox)
    memory.prepare()
    assert list(memory.recall("retry with backoff")) == []
    memory.add_episode(episode("20250314-090000-aaaa", "Retry the upload with backoff"))
    memory.close()
    assert len(notices) == 1
    assert "goes on without it" in notices[0]
    assert "does not answer like a Chroma server" in notices[0]
    kept = [json.loads(line) for line in outbox.path.read_text().splitlines()]
    assert [k["op"] for k in kept] == ["add_episode"]
