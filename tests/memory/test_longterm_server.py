"""Long-term memory on a real Chroma server (`chroma run`) through chromadb's HttpClient."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC

import pytest

from agent_cli.core.errors import MemoryUnavailable, StorageError
from agent_cli.core.models import Episode, TaskRecord
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.place import ChromaServer
from chromakit import TokenProxy, free_port
from embedkit import HashEmbedder

pytestmark = pytest.mark.slow  # a `chroma run` process serves these tests


def episode(run_id: str, goal: str) -> Episode:
    return Episode(
        run_id=run_id,
        goal=goal,
        plan=[goal],
        status="verified",
        tasks=[TaskRecord(goal=goal, status="verified", attempts=1, acceptance_cmd="pytest -q")],
        summary="done",
    )


def rest(server: ChromaServer, path: str):
    """GET a path of the server's REST API (what is really stored there, without chromadb)."""
    with urllib.request.urlopen(f"{server.url}/api/v2{path}", timeout=5) as reply:
        return json.loads(reply.read())


def test_memory_on_the_server_is_shared_between_clients(chroma_server, chroma_database):
    server = ChromaServer(chroma_server.url, database=chroma_database)
    embedder = HashEmbedder()
    with LongTermMemory(server, embedder) as first:
        first.add_episode(
            episode("20250314-090000-aaaa", "Add a median function to the stats module")
        )
        fact = first.add_fact("The stats tests run with pytest tests/test_stats.py", "harness")
    with LongTermMemory(server, HashEmbedder()) as second:
        found = second.recall("median function, stats tests with pytest", k=5)
        assert {r.id for r in found} == {"20250314-090000-aaaa", fact}
        assert second.counts() == {
            "episodes": 1,
            "facts": 1,
            "notes": 0,
            "procedures": 0,
            "archive": 0,
        }
        assert second.forget(fact) == 1
    stored = rest(server, f"/tenants/default_tenant/databases/{chroma_database}/collections")
    by_name = {c["name"]: c for c in stored}
    assert set(by_name) == {"episodes", "facts", "archive"}
    for col in by_name.values():  # our embedder is recorded; the server embeds nothing itself
        assert col["metadata"]["embedder"] == "hash-256" and col["metadata"]["dim"] == 256
        assert col["configuration_json"]["embedding_function"] is None
        assert col["configuration_json"]["hnsw"]["space"] == "cosine"
    assert embedder.texts == 2  # the episode and the fact: every stored vector came from us


def test_tenant_and_database_are_created_and_kept_apart(chroma_server, chroma_database):
    team = ChromaServer(
        chroma_server.url, tenant="acme-" + chroma_database[-20:], database=chroma_database
    )
    with LongTermMemory(team, HashEmbedder()) as mem:
        mem.add_fact("Deploys go through make deploy", "harness")
    assert rest(team, f"/tenants/{team.tenant}/databases/{team.database}")["name"] == team.database
    other = ChromaServer(chroma_server.url, database=chroma_database + "-other")
    with LongTermMemory(other, HashEmbedder()) as mem:
        assert mem.counts()["facts"] == 0 and mem.recall("deploys make deploy") == []


def test_a_server_that_is_down_is_one_clear_error(tmp_path):
    down = ChromaServer(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    with pytest.raises(MemoryUnavailable) as e:
        LongTermMemory(down, HashEmbedder())
    line = e.value.one_line()
    assert down.url in line and "cannot be reached" in line and "\n" not in line
    assert "memory_url" in line


def test_a_server_lost_midway_is_unavailable_and_a_run_goes_on(chroma_process):
    proc = chroma_process()
    server = ChromaServer(proc.url, timeout_s=2)
    mem = LongTermMemory(server, HashEmbedder())
    mem.add_fact("The service listens on port 8080", "harness")
    proc.stop()
    with pytest.raises(MemoryUnavailable, match=f"memory server {proc.url}: searching failed"):
        mem.recall("which port does the service listen on")
    notices: list[str] = []
    opened: list[LongTermMemory] = []
    fallback = FallbackLongTerm(lambda: opened.append(mem) or mem, notices.append)
    assert fallback.recall("which port does the service listen on") == []
    fallback.add_episode(episode("20250314-090000-bbbb", "Change the port"))  # kept nowhere
    assert fallback.recall("port") == [] and len(opened) == 1, "not asked again once gone"
    assert len(notices) == 1 and "goes on without it" in notices[0] and proc.url in notices[0]


def test_fallback_uses_the_store_while_it_answers(chroma_server, chroma_database):
    server = ChromaServer(chroma_server.url, database=chroma_database)
    notices: list[str] = []
    fallback = FallbackLongTerm(lambda: LongTermMemory(server, HashEmbedder()), notices.append)
    fallback.add_fact("Releases are tagged vMAJOR.MINOR", "harness")
    assert [r.kind for r in fallback.recall("how are releases tagged")] == ["fact"]
    assert notices == []


def test_other_server_errors_are_storage_errors_not_outages(chroma_server, chroma_database):
    server = ChromaServer(chroma_server.url, database=chroma_database)
    with LongTermMemory(server, HashEmbedder()) as mem:
        mem.add_fact("A fact with 256-dimension vectors", "harness")
    lying = HashEmbedder(dim=8)
    lying.name = "hash-256"  # claims the stored embedder: the server itself refuses the vectors
    with LongTermMemory(server, lying) as mem:
        with pytest.raises(StorageError) as e:
            mem.add_fact("Another fact, with 8-dimension vectors", "harness")
    assert not isinstance(e.value, MemoryUnavailable)
    line = e.value.one_line()
    assert f"memory server {server}: writing failed" in line and "see the server's log" in line


def test_the_token_goes_with_every_request_and_a_wrong_one_is_one_line(
    chroma_server, chroma_database
):
    proxy = TokenProxy(chroma_server.url, "team-token-0123456789").start()
    try:
        good = ChromaServer(proxy.url, database=chroma_database, token="team-token-0123456789")
        with LongTermMemory(good, HashEmbedder()) as mem:
            mem.add_fact("Staging deploys need the VPN", "harness")
            assert [r.kind for r in mem.recall("staging deploys vpn")] == ["fact"]
        assert len(proxy.seen) > 5
        assert {auth for _, _, auth in proxy.seen} == {"Bearer team-token-0123456789"}
        wrong = ChromaServer(proxy.url, database=chroma_database, token="not-the-token-000")
        with pytest.raises(MemoryUnavailable) as e:
            LongTermMemory(wrong, HashEmbedder())
        line = e.value.one_line()
        assert "refused the token (HTTP 401)" in line and "AGENT_MEMORY_TOKEN" in line
        assert "not-the-token-000" not in line
    finally:
        proxy.stop()


def test_expire_export_and_reindex_work_on_the_server(chroma_server, chroma_database, tmp_path):
    from datetime import datetime, timedelta

    server = ChromaServer(chroma_server.url, database=chroma_database)
    then = datetime(2025, 3, 14, tzinfo=UTC)
    with LongTermMemory(server, HashEmbedder()) as mem:
        mem.add_episode(episode("20250314-090000-cccc", "Speed up the CSV importer"))
        mem.add_fact("A note that nobody will use again", "model", trust=0.6, now=then, ttl_days=1)
        assert mem.expire(now=then + timedelta(days=3)) == 1
        assert mem.export(tmp_path / "all.jsonl") == 2
    with LongTermMemory(server, HashEmbedder(dim=64)) as other:  # the team changed embedders
        assert other.reindex() == 2
        assert [r.id for r in other.recall("CSV importer speed")] == ["20250314-090000-cccc"]
    names = {
        c["name"]
        for c in rest(server, f"/tenants/default_tenant/databases/{chroma_database}/collections")
    }
    assert names == {"episodes", "facts", "archive"}  # the re-embedded copies were swapped in


def test_an_address_that_is_not_a_chroma_server_says_so(fake_server):
    model_endpoint = fake_server([])  # an HTTP server, but the model's, not Chroma's
    with pytest.raises(MemoryUnavailable) as e:
        LongTermMemory(ChromaServer(model_endpoint.url.rsplit("/v1", 1)[0]), HashEmbedder())
    assert "does not answer like a Chroma server" in e.value.one_line()


def test_collections_a_teammate_reindexed_are_looked_up_again(chroma_server, chroma_database):
    server = ChromaServer(chroma_server.url, database=chroma_database)
    with LongTermMemory(server, HashEmbedder()) as mine:
        mine.add_fact("The API listens on port 8080", "harness")
        with LongTermMemory(server, HashEmbedder()) as teammate:
            teammate.reindex()  # every collection replaced by its re-embedded copy
        mine.add_episode(episode("20250314-090000-dddd", "Move the API to port 9090"))
        mine.curate("the port is set in api/config.py", topic="", origin_event_id="e1")
        with LongTermMemory(server, HashEmbedder()) as teammate:
            teammate.reindex()
        assert {r.kind for r in mine.recall("which port does the API listen on")} >= {"fact"}
    with LongTermMemory(server, HashEmbedder()) as later:
        assert later.counts() == {
            "episodes": 1,
            "facts": 1,
            "notes": 1,
            "procedures": 0,
            "archive": 0,
        }


def test_a_server_started_again_with_no_data_takes_the_next_write(chroma_process):
    first = chroma_process()
    server = ChromaServer(first.url, database="team")
    with LongTermMemory(server, HashEmbedder()) as mem:
        mem.add_fact("The API listens on port 8080", "harness")
        first.stop()
        again = chroma_process()  # an empty data directory, on the same address
        again.port, again.url = first.port, first.url
        again.stop()
        again.start()
        mem.add_fact("Releases are tagged vMAJOR.MINOR", "harness")
    with LongTermMemory(server, HashEmbedder()) as later:
        assert [r.text for r in later.recall("how are releases tagged")] == [
            "Releases are tagged vMAJOR.MINOR"
        ]


class DeletingProxy(TokenProxy):
    """A proxy in front of a Chroma server that deletes every collection of `database` before
    it passes on a write: a collection found again is gone again."""

    def __init__(self, upstream: str, token: str, database: str) -> None:
        super().__init__(upstream, token)
        self.database = database

    def _handle(self, request) -> None:
        if request.command == "POST" and request.path.endswith(("/upsert", "/add")):
            base = f"{self.upstream.geturl()}/api/v2/tenants/default_tenant/databases/"
            cols = f"{base}{self.database}/collections"
            with urllib.request.urlopen(cols, timeout=5) as reply:
                names = [c["name"] for c in json.loads(reply.read())]
            for name in names:
                urllib.request.urlopen(
                    urllib.request.Request(f"{cols}/{name}", method="DELETE"), timeout=5
                ).close()
        super()._handle(request)


def test_a_collection_gone_again_keeps_the_write_in_the_outbox(
    chroma_server, chroma_database, tmp_path
):
    from agent_cli.memory.longterm.write.outbox import Outbox

    proxy = DeletingProxy(chroma_server.url, "tok", chroma_database).start()
    try:
        server = ChromaServer(proxy.url, database=chroma_database, token="tok")
        notices: list[str] = []
        outbox = Outbox(tmp_path / "memory-outbox.jsonl", str(server))
        fallback = FallbackLongTerm(
            lambda: LongTermMemory(server, HashEmbedder()), notices.append, outbox=outbox
        )
        fallback.add_fact("The API listens on port 8080", "harness")
        fallback.curate("the port is set in api/config.py", topic="", origin_event_id="e1")
    finally:
        proxy.stop()
    kept = [json.loads(line)["op"] for line in outbox.path.read_text().splitlines()]
    assert kept == ["add_fact", "curate"]
    assert len(notices) == 1 and "does not exist" in notices[0] and "\n" not in notices[0]


class GatewayProxy(TokenProxy):
    """A proxy in front of a Chroma server that, once `down` is set, answers every request
    with its own 502 page, as nginx does when its backend is gone."""

    down = False

    def _handle(self, request) -> None:
        if not self.down:
            return super()._handle(request)
        request.rfile.read(int(request.headers.get("Content-Length") or 0))
        page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        request.send_response(502)
        request.send_header("Content-Type", "text/html")
        request.send_header("Content-Length", str(len(page)))
        request.end_headers()
        request.wfile.write(page)


def test_a_server_answering_error_pages_midway_keeps_the_writes_in_the_outbox(
    chroma_server, chroma_database, tmp_path
):
    from agent_cli.memory.longterm.write.outbox import Outbox

    proxy = GatewayProxy(chroma_server.url, "tok").start()
    server = ChromaServer(proxy.url, database=chroma_database, token="tok")
    opened: list[LongTermMemory] = []

    def fallback(notices: list[str]) -> FallbackLongTerm:
        outbox = Outbox(tmp_path / "memory-outbox.jsonl", str(server))
        return FallbackLongTerm(
            lambda: opened.append(LongTermMemory(server, HashEmbedder())) or opened[-1],
            notices.append,
            outbox=outbox,
        )

    notices: list[str] = []
    try:
        run = fallback(notices)
        run.add_fact("The API listens on port 8080", "harness")  # the server answers
        proxy.down = True  # its backend is gone: the proxy's own page from now on
        run.add_episode(episode("20250314-090000-eeee", "Move the API to port 9090"))
        run.add_fact("Releases are tagged vMAJOR.MINOR", "harness")
        proxy.down = False
        later: list[str] = []
        fallback(later).add_fact("The next run learned this", "harness")
        found = opened[-1].recall("how are releases tagged, moving the API port")
    finally:
        for mem in opened:
            mem.close()
        proxy.stop()
    assert len(notices) == 1 and "goes on without it" in notices[0], notices
    assert "HTTP 502 Bad Gateway" in notices[0] and "<" not in notices[0]
    assert later == [
        "long-term memory: sent 2 write(s) kept by an earlier run while it was unreachable"
    ]
    assert {r.id for r in found} >= {"20250314-090000-eeee"}
    assert "Releases are tagged vMAJOR.MINOR" in {r.text for r in found}
