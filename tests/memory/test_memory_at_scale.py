"""Long-term memory at scale (issue 21, class 17): an import streams in bounded batches and says
how far it got; a store too large for a recall snapshot is recalled from through Chroma's
index, reading only the rows asked for, and so is the repository digest's listing.

Rows are counted by `Counting` (collectionkit.py), a collection of our own around the real
Chroma collection.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_cli.agent.learn import digest
from agent_cli.core.errors import ModelError, StorageError
from agent_cli.memory.longterm import curation, snapshot
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.curation import CONTENT_UPGRADE, content_id, key_of
from agent_cli.memory.longterm.store import CANDIDATES, Collection, Rows
from collectionkit import Counting
from embedkit import HashEmbedder

DIM = 16  # a small vector: Chroma's index is built faster, the store's behaviour is the same
TOPIC = "git:0123"


class FailingAfter:
    """An embedder that embeds `budget` texts, then fails as an unreachable endpoint does."""

    def __init__(self, inner: HashEmbedder, budget: int) -> None:
        self.inner, self.budget = inner, budget
        self.name, self.dim = inner.name, inner.dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        if len(texts) > self.budget:
            raise ModelError("the embeddings endpoint did not answer")
        self.budget -= len(texts)
        return self.inner.embed(texts)


def record(i: int) -> dict[str, Any]:
    """One exported fact of this repository (three in four) or another."""
    meta = {
        "kind": "fact",
        "source": "harness",
        "trust": 1.0,
        "created_at": "2026-01-01T00:00:00+00:00",
        "text_hash": f"h{i}",
        "ttl_days": 0.0,
        "topic": TOPIC if i % 4 else "git:other",
        "topic_alt": "",
    }
    words = ("parser", "cache", "login", "release", "migration", "scheduler")
    doc = f"the {words[i % 6]} of module {i % 97} keeps item {i}"
    return {"collection": "facts", "id": f"mem_{i:06d}", "document": doc, "metadata": meta}


def write_export(path: Path, lines: Any) -> Path:
    """An export file of `lines`, written one at a time."""
    with open(path, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
    return path


def counted(mem: LongTermMemory, name: str = "facts") -> Counting:
    """The collection `name` of `mem`, counted from now on."""
    wrapper = Counting(mem.store.cols[name])
    mem.store.cols[name] = wrapper
    return wrapper


def test_an_import_goes_to_the_store_in_bounded_batches_and_says_how_far_it_got(tmp_path):
    path = write_export(tmp_path / "export.jsonl", (json.dumps(record(i)) for i in range(2000)))
    seen: list[tuple[int, int, int]] = []
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(DIM), snapshot_rows=1000) as mem:
        facts = counted(mem)
        assert mem.import_(path, progress=lambda *p: seen.append(p), batch=200) == 2000
        assert facts.upserts == [200] * 10  # never more than a batch at once
        assert seen == [(200 * n, 2000, 0) for n in range(1, 11)]
        assert facts.col.count() == 2000
        seen.clear()
        facts.upserts.clear()
        assert mem.import_(path, progress=lambda *p: seen.append(p), batch=200) == 2000
        assert facts.upserts == [] and seen[-1] == (2000, 2000, 2000)  # all stored: skipped
    assert not snapshot.exists(tmp_path / "chroma")  # too large for one: recall uses the index


def test_a_malformed_line_in_the_middle_imports_nothing_and_says_where(tmp_path):
    lines = [json.dumps(record(i)) for i in range(3000)]
    lines.insert(2400, '{"collection": "facts", "id": ')  # cut off
    path = write_export(tmp_path / "export.jsonl", lines)
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(DIM)) as mem:
        with pytest.raises(StorageError) as e:
            mem.import_(path)
        assert "line 2401 is not a memory record" in e.value.message
        assert "nothing was imported (2,400 valid records before it)" in e.value.message
        assert mem.counts()["facts"] == 0


@pytest.mark.parametrize(
    "change, why",
    [
        ({"metadata": {"nested": {"a": 1}}}, "metadata field 'nested' holds dict"),
        ({"metadata": {"tags": []}}, "metadata field 'tags' holds list"),
        ({"metadata": {"tags": ["a", 1]}}, "metadata field 'tags' holds list"),
        ({"metadata": {"": "x"}}, "metadata key '' is empty or reserved"),
        ({"metadata": {"chroma:document": "x"}}, "metadata key 'chroma:document' is"),
        ({"id": " "}, "the id is empty"),
        ({"id": "x" * 300_000}, "the id has 300,000 characters (at most 512)"),
        ({"document": "x" * 300_000}, "the document has 300,000 characters"),
    ],
)
def test_a_record_the_store_would_refuse_imports_nothing(tmp_path, change, why):
    """What the record models accept but Chroma refuses is refused in the check, before any
    batch is written: a file is imported whole or not at all."""
    bad = record(1999)
    bad["metadata"] = {**bad["metadata"], **change.pop("metadata", {})}
    bad.update(change)
    lines = [json.dumps(record(i)) for i in range(1999)] + [json.dumps(bad)]
    path = write_export(tmp_path / "export.jsonl", lines)
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(DIM)) as mem:
        with pytest.raises(StorageError) as e:
            mem.import_(path, batch=500)
        assert f"line 2000: {why}" in e.value.message, e.value.message
        assert "nothing was imported (1,999 valid records before it)" in e.value.message
        assert mem.counts()["facts"] == 0
        tags = record(7)
        tags["metadata"] = {**tags["metadata"], "tags": ["a", "b"], "gone": None}
        good = write_export(tmp_path / "good.jsonl", [json.dumps(tags)])
        assert mem.import_(good) == 1 and mem.counts()["facts"] == 1  # lists of one kind, null


def test_a_failure_while_writing_says_how_far_it_got_and_the_same_import_continues(tmp_path):
    path = write_export(tmp_path / "export.jsonl", (json.dumps(record(i)) for i in range(3000)))
    store = tmp_path / "chroma"
    with LongTermMemory(store, FailingAfter(HashEmbedder(DIM), 1200)) as mem:
        with pytest.raises(ModelError) as e:
            mem.import_(path, batch=500)
        assert "imported 1,000 of 3,000 records before it stopped" in e.value.message
        assert "import the same file again to continue" in e.value.hint
        assert mem.counts()["facts"] == 1000
    embedder, seen = HashEmbedder(DIM), []
    with LongTermMemory(store, embedder) as mem:
        assert mem.import_(path, progress=lambda *p: seen.append(p), batch=500) == 3000
        assert mem.counts()["facts"] == 3000
    assert embedder.texts == 2000 and seen[-1] == (3000, 3000, 1000)  # only the rest embedded


def test_a_store_too_large_for_a_snapshot_recalls_only_the_rows_asked_for(tmp_path):
    from agent_cli.cli.commands.memory_commands import _open_to_read
    from agent_cli.cli.config.settings import Settings

    path = write_export(tmp_path / "export.jsonl", (json.dumps(record(i)) for i in range(3000)))
    store = tmp_path / "state" / "chroma"
    with LongTermMemory(store, HashEmbedder(DIM), snapshot_rows=1000) as mem:
        mem.import_(path)
    assert not snapshot.exists(store)
    reader = _open_to_read(Settings(), tmp_path / "state")
    assert isinstance(reader, LongTermMemory)  # Chroma's index, not a snapshot read whole
    reader.close()
    with LongTermMemory(store, HashEmbedder(DIM), snapshot_rows=1000) as mem:
        facts, episodes = counted(mem), counted(mem, "episodes")  # 3,000 facts, no episodes
        hits = mem.recall("the parser of module 5", k=5, topics=[TOPIC, ""], min_score=0.0)
        assert len(hits) == 5 and all(h.metadata["topic"] == TOPIC for h in hits)
        # the rows the index named, each read once: the 20 nearest, more only when the
        # approximate index's 20 hold fewer than 5 of this repository's
        assert facts.rows_read == len(facts.answered) <= CANDIDATES and episodes.rows_read == 0
        facts.rows_read = 0
        chosen = digest.build(mem, "the parser of module 5", [TOPIC], 2000, min_score=0.3)
        assert chosen.items and chosen.left_out > 0
        # the nearest (a filtered query reads four times as many) and the first rows, filtered
        assert facts.rows_read <= 4 * digest.NEAREST + digest.SCAN < 3000
        facts.rows_read = 0
        assert len(mem.listing([TOPIC], limit=1000)) == 750  # three in four are this one's
        assert facts.rows_read == 1000


def test_a_repository_with_few_items_in_a_large_store_still_gets_them(tmp_path):
    lines = [json.dumps(record(i)) for i in range(3000)]
    for n in (10, 1500, 2990):  # three of this repository's items among others'
        rec = record(n)
        rec["metadata"]["topic"] = "git:rare"
        lines[n] = json.dumps(rec)
    path = write_export(tmp_path / "export.jsonl", lines)
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(DIM), snapshot_rows=1000) as mem:
        mem.import_(path)
        facts = counted(mem)
        hits = mem.recall("the cache of module 40", k=5, topics=["git:rare"], min_score=-1.0)
        assert sorted(h.id for h in hits) == ["mem_000010", "mem_001500", "mem_002990"]
        assert facts.rows_read <= 1000 + 3  # the nearest 1,000, then the filtered query


def test_a_snapshot_larger_than_the_bound_is_not_read(tmp_path):
    store = tmp_path / "chroma"
    with LongTermMemory(store, HashEmbedder(DIM)) as mem:
        mem.add_fact("the parser keeps quotes", "harness")
    size = snapshot.path_of(store).stat().st_size
    assert snapshot.load(store, max_bytes=size) is not None
    assert snapshot.load(store, max_bytes=size - 1) is None
    assert not snapshot.exists(store)  # deleted: the store writes a new one when next written


def content_record(i: int) -> dict[str, Any]:
    """`record(i)` under the id its content gives, as this version writes every item."""
    rec = record(i)
    rec["id"] = content_id(key_of(rec["document"], rec["metadata"]))
    return rec


def test_the_content_id_upgrade_reads_the_store_once_and_again_only_after_an_older_write(
    tmp_path,
):
    store = tmp_path / "chroma"
    path = write_export(tmp_path / "new.jsonl", (json.dumps(content_record(i)) for i in range(300)))
    with LongTermMemory(store, HashEmbedder(DIM)) as mem:
        mem.import_(path)
        facts = counted(mem)
        assert mem.upgrade_ids() == 0 and facts.rows_read == 0  # a new store holds no older ids
        mem.store.mark_upgraded("facts", CONTENT_UPGRADE, done=False)  # as an older store is
        assert mem.upgrade_ids() == 0
        assert facts.rows_read == 300  # the first run after the upgrade looks at every item
        facts.rows_read = 0
        assert mem.upgrade_ids() == 0 and facts.rows_read == 0  # recorded: not again
    with LongTermMemory(store, HashEmbedder(DIM)) as mem:  # recorded in the store itself
        facts = counted(mem)
        assert mem.upgrade_ids() == 0 and facts.rows_read == 0
        old = write_export(tmp_path / "old.jsonl", [json.dumps(record(7))])  # a dated id
        mem.import_(old)
        assert mem.upgrade_ids() == 1  # the older export's item got its content id
        assert content_record(7)["id"] in set(mem.collection("facts").get(include=[])["ids"])
        facts.rows_read = 0
        assert mem.upgrade_ids() == 0 and facts.rows_read == 0
        legacy = mem.curate("keep the fixtures small", topic="calc", origin_event_id="e1")
        assert mem.adopt("calc", TOPIC) == 1  # its key is now the repository's: a new id
        assert mem.upgrade_ids() == 1
        assert legacy not in set(mem.collection("facts").get(include=[])["ids"])


class Logged(HashEmbedder):
    """A HashEmbedder that writes "embed" into `log` each time it embeds."""

    def __init__(self, dim: int, log: list[str]) -> None:
        super().__init__(dim)
        self.log = log

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.log.append("embed")
        return super().embed(texts)


class ReadLogged(Counting):
    """A counted collection that writes "read" into `log` at each read of rows."""

    def __init__(self, col: Collection, log: list[str]) -> None:
        super().__init__(col)
        self.log = log

    def get(self, *args: Any, **kwargs: Any) -> Rows:
        self.log.append("read")
        return super().get(*args, **kwargs)


def test_a_reindex_writes_each_batch_before_it_reads_the_next(tmp_path):
    store, log = tmp_path / "chroma", []
    path = write_export(tmp_path / "e.jsonl", (json.dumps(content_record(i)) for i in range(2100)))
    with LongTermMemory(store, HashEmbedder(DIM)) as mem:
        mem.import_(path)
    with LongTermMemory(store, Logged(DIM + 8, log)) as mem:
        mem.store.cols["facts"] = ReadLogged(mem.store.cols["facts"], log)
        assert mem.reindex() == 2100
        facts = mem.collection("facts")
        assert facts.count() == 2100 and facts.metadata["embedder"] == f"hash-{DIM + 8}"
    reads = [n for n, what in enumerate(log) if what == "read"]
    assert len(reads) >= 2 and log.index("embed") < reads[-1]  # never the whole store at once


def test_a_repository_with_many_procedures_reads_a_bounded_number_of_them(tmp_path, monkeypatch):
    monkeypatch.setattr(curation, "PROCEDURES_READ", 50)
    procedures = []
    for i in range(120):
        rec = content_record(i)
        cmd = f"pytest -q tests/test_{i}.py"
        rec["metadata"].update(kind="procedure", command=cmd, topic=TOPIC, confirmations=1 + i % 7)
        rec["document"] = f"`{cmd}` checks work here (task {i})"
        rec["id"] = content_id(key_of(rec["document"], rec["metadata"]))
        procedures.append(json.dumps(rec))
    path = write_export(tmp_path / "p.jsonl", [*procedures, json.dumps(content_record(1))])
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(DIM)) as mem:
        mem.import_(path)
        facts = counted(mem)
        found = mem.procedures(TOPIC, k=5)
        assert len(found) == 5 and {r.kind for r in found} == {"procedure"}
        assert {int(r.metadata["confirmations"]) for r in found} == {7}  # the most confirmed
        assert facts.rows_read == 50
        assert mem.counts()["procedures"] == 120 and mem.counts()["facts"] == 1


def test_a_large_older_store_is_upgraded_by_a_reindex_not_at_the_end_of_a_run(tmp_path):
    path = write_export(tmp_path / "old.jsonl", (json.dumps(record(i)) for i in range(60)))
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(DIM), snapshot_rows=50) as mem:
        mem.import_(path)  # dated ids: the upgrade is to be done again
        facts = counted(mem)
        assert mem.upgrade_ids() == 0 and facts.rows_read == 0  # 60 items: over the bound
        assert mem.reindex() == 60
        ids = set(mem.collection("facts").get(include=[])["ids"])
        assert ids == {content_record(i)["id"] for i in range(60)}


def test_two_exports_of_one_store_are_the_same_bytes(tmp_path):
    path = write_export(tmp_path / "export.jsonl", (json.dumps(record(i)) for i in range(300)))
    with LongTermMemory(tmp_path / "chroma", HashEmbedder(DIM)) as mem:
        mem.import_(path)
        mem.export(tmp_path / "one.jsonl")
        mem.export(tmp_path / "two.jsonl")
    one = (tmp_path / "one.jsonl").read_bytes()
    assert one == (tmp_path / "two.jsonl").read_bytes()
    for line in one.decode().splitlines():
        keys = list(json.loads(line)["metadata"])
        assert keys == sorted(keys)
