"""Writes kept while the memory server is down, sent by the next run that reaches the store."""

from __future__ import annotations

import json

from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.place import ChromaServer
from agent_cli.memory.longterm.write.outbox import Outbox
from chromakit import free_port
from embedkit import HashEmbedder
from episodekit import episode

KEY = "sk-outboxtest0123456789abcdef"


def down_fallback(
    tmp_path, notices: list[str], server: ChromaServer | None = None
) -> tuple[FallbackLongTerm, Outbox]:
    """Long-term memory on a server nobody listens on, with an outbox, as `agent run` has it."""
    server = server or ChromaServer(f"http://127.0.0.1:{free_port()}", database="team", timeout_s=1)
    outbox = Outbox(tmp_path / "state" / "memory-outbox.jsonl", str(server), (KEY,))
    lazy = LazyLongTermMemory(server, HashEmbedder())
    return FallbackLongTerm(lambda: lazy, notices.append, outbox=outbox), outbox


def learn(memory) -> None:
    """What the end of a run writes (learn.remember)."""
    memory.add_episode(episode("20250314-090000-cafe", "Add retry with backoff to the HTTP client"))
    memory.add_procedure(
        "pytest -q tests/test_http.py",
        "Add retry",
        topic="proj",
        run_id="20250314-090000-cafe",
        files={"tests/test_http.py": "abc"},
    )
    memory.curate(
        f"The HTTP client reads its key from {KEY}",
        topic="proj",
        origin_event_id="20250314-090000-cafe/m3",
        trust=0.5,
        ttl_days=90,
        run_id="20250314-090000-cafe",
        task="Add retry",
    )
    memory.add_fact(
        "Retries back off exponentially from 0.5 s",
        "model, run 20250314-090000-cafe",
        trust=0.5,
        topic="proj",
        run_id="20250314-090000-cafe",
        files={},
    )


def test_a_run_with_the_server_down_keeps_its_writes_in_the_outbox_without_secrets(tmp_path):
    notices: list[str] = []
    fallback, outbox = down_fallback(tmp_path, notices)
    assert fallback.recall("retry") == []
    learn(fallback)
    lines = outbox.path.read_text().splitlines()
    assert [json.loads(line)["op"] for line in lines] == [
        "add_episode",
        "add_procedure",
        "curate",
        "add_fact",
    ]
    assert all(json.loads(line)["store"] == outbox.store for line in lines)
    assert KEY not in outbox.path.read_text() and "[REDACTED]" in outbox.path.read_text()
    assert len(notices) == 1 and "kept for the next run that reaches it" in notices[0]


def test_the_next_run_that_reaches_the_store_sends_them_first_then_forgets_them(tmp_path):
    fallback, outbox = down_fallback(tmp_path, [])
    learn(fallback)
    other = Outbox(outbox.path, "http://elsewhere:8000 (tenant t, database d)")
    other.keep("add_fact", ("Meant for another server", "harness"), {})
    outbox.keep("curate", ("",), {"topic": "proj", "origin_event_id": "e"})  # refused: no text

    # The store answers now (here an embedded one, under the same name as the server).
    notices: list[str] = []
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        back = FallbackLongTerm(
            lambda: store, notices.append, outbox=Outbox(outbox.path, outbox.store, (KEY,))
        )
        assert back.recall("retry backoff HTTP client", kind="episode") == []  # reads send nothing
        back.add_fact("The run after the outage learned this", "harness", topic="proj")
        assert notices == [
            "long-term memory: sent 4 write(s) kept by an earlier run while it was unreachable"
        ]
        assert [r.id for r in store.recall("retry backoff HTTP client", kind="episode")] == [
            "20250314-090000-cafe"
        ]
        assert {k: v for k, v in store.counts().items() if v} == {
            "episodes": 1,
            "facts": 2,
            "notes": 1,
            "procedures": 1,
        }
        back.add_fact("A second write sends nothing again", "harness")
        assert len(notices) == 1
    left = [json.loads(line) for line in outbox.path.read_text().splitlines()]
    assert [e["args"][0] for e in left] == ["Meant for another server"]  # it waits for its server


def test_an_outbox_for_a_store_that_is_still_down_keeps_everything(tmp_path):
    server = ChromaServer(f"http://127.0.0.1:{free_port()}", database="team", timeout_s=1)
    fallback, outbox = down_fallback(tmp_path, [], server)
    learn(fallback)
    before = outbox.path.read_text()
    notices: list[str] = []
    again, _ = down_fallback(tmp_path, notices, server)  # the next run: still down
    again.add_fact("Learned during the second outage", "harness")
    assert outbox.path.read_text().startswith(before)
    assert len(outbox.path.read_text().splitlines()) == len(before.splitlines()) + 1
    assert len(notices) == 1 and "cannot be reached" in notices[0]
