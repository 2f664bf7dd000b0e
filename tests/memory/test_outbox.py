"""Writes kept while the memory server is down, sent by the next run that reaches the store."""

from __future__ import annotations

import json
from typing import Any

import chromadb.errors
import pytest

from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.place import ChromaServer, Refused, storage_error
from agent_cli.memory.longterm.store import Meta
from agent_cli.memory.longterm.write.outbox import Outbox
from chromakit import free_port
from collectionkit import Counting
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
            "long-term memory: sent 4 write(s) kept by an earlier run while it was unreachable",
            "long-term memory: 1 write(s) kept by an earlier run cannot be made, so they were "
            f"set aside in {outbox.rejected_path}: a memory item needs some text",
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
        assert len(notices) == 2
    left = [json.loads(line) for line in outbox.path.read_text().splitlines()]
    assert [e["args"][0] for e in left] == ["Meant for another server"]  # it waits for its server
    aside = [json.loads(line) for line in outbox.rejected_path.read_text().splitlines()]
    assert [(e["op"], e["args"]) for e in aside] == [("curate", [""])]  # kept, as it was


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


class Failing(Counting):
    """A collection whose writes fail, while `failing` is set, with the error chromadb raises
    for a server's own failure (HTTP 500 InternalError: a locked database, a full disk)."""

    failing = True

    def upsert(
        self, ids: list[str], embeddings: Any, documents: list[str], metadatas: list[Meta]
    ) -> None:
        if self.failing:
            raise chromadb.errors.InternalError("database is locked")
        super().upsert(ids, embeddings, documents, metadatas)


def test_a_store_failing_to_write_keeps_every_write_for_the_next_run(tmp_path):
    fallback, outbox = down_fallback(tmp_path, [])
    learn(fallback)
    outbox.keep("curate", ("",), {"topic": "proj", "origin_event_id": "e"})  # refused: no text
    before = outbox.path.read_text()
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        for name in ("episodes", "facts"):
            store.store.cols[name] = Failing(store.store.cols[name])
        notices: list[str] = []
        back = FallbackLongTerm(lambda: store, notices.append, outbox=outbox)
        back.add_fact("The run after the outage learned this", "harness", topic="proj")
    assert outbox.path.read_text() == before  # not one write lost, none set aside
    assert not outbox.rejected_path.exists()
    assert notices == [
        f"long-term memory: 5 write(s) kept by an earlier run stay in {outbox.path} for the "
        f"next run, as the store failed to make them: memory store at {tmp_path / 'chroma'}: "
        "writing failed: database is locked (check the directory (permissions, free space) "
        "or move it aside)"
    ]
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        sent = outbox.send(store)  # the next run: the store writes again
        assert (sent.sent, sent.refused, sent.kept) == (4, 1, 0)
        assert store.counts()["episodes"] == 1
    assert not outbox.path.exists()
    aside = [json.loads(line) for line in outbox.rejected_path.read_text().splitlines()]
    assert [e["op"] for e in aside] == ["curate"]  # only the write refused for what it is


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (chromadb.errors.InternalError("database is locked"), False),
        (chromadb.errors.InternalError("attempt to write a readonly database"), False),
        (chromadb.errors.RateLimitError("slow down"), False),
        (chromadb.errors.AuthorizationError("token expired"), False),
        (
            chromadb.errors.InvalidArgumentError("Empty ID, ID must have at least one character"),
            True,
        ),
        (ValueError("Expected metadata value to be a str, int, float or bool"), True),
        (  # every record of the collection alike: the store's, not the record's
            chromadb.errors.InvalidArgumentError(
                "Collection expecting embedding with dimension of 384, got 256"
            ),
            False,
        ),
    ],
)
def test_only_what_a_store_refuses_for_what_it_is_is_a_refusal(error, refused, tmp_path):
    for where in (ChromaServer("http://chroma.internal:8000"), tmp_path / "chroma"):
        said = storage_error(where, "writing", error)
        assert isinstance(said, StorageError) and isinstance(said, Refused) == refused
