"""Long-term memory that several runs write: content ids, the `content-ids` upgrade, the write
lock (busy: the outbox; another process wrote: a fresh client)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.curation import CONTENT_UPGRADE, content_id, item_key, key_of
from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.write.lock import FILE, StoreBusy
from agent_cli.memory.longterm.write.outbox import Outbox
from embedkit import HashEmbedder

TOPIC = "git:1111 url:github.com/team/calc"
TESTS = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "chroma"


def facts(mem: LongTermMemory) -> dict[str, tuple[str, dict]]:
    got = mem.collection("facts").get(include=["documents", "metadatas"])
    return {
        i: (d, m) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    }


def test_the_same_item_from_two_clients_is_one_record_under_its_content_id(store):
    with LongTermMemory(store, HashEmbedder()) as first:
        fact = first.add_fact("The parser lives in calc/parse.py", "run a", topic=TOPIC)
        proc = first.add_procedure("pytest -q tests/test_parse.py", "parse", topic=TOPIC)
    with LongTermMemory(store, HashEmbedder()) as second:
        assert second.add_fact("The parser  lives in calc/parse.py ", "run b", topic=TOPIC) == fact
        assert second.add_procedure("pytest -q tests/test_parse.py", "again", topic=TOPIC) == proc
        stored = facts(second)
    assert fact == content_id(item_key(TOPIC, "The parser lives in calc/parse.py") or "")
    assert set(stored) == {fact, proc}
    assert stored[fact][1]["confirmations"] == 2 and stored[proc][1]["confirmations"] == 2
    assert proc == content_id(key_of(stored[proc][0], stored[proc][1]))


def legacy_copy(mem: LongTermMemory, item_id: str, new_id: str, **meta) -> None:
    """Store item `item_id` again under the dated id `new_id`, as an earlier version wrote it
    (in a store that version made, which records no upgrade)."""
    mem.store.mark_upgraded("facts", CONTENT_UPGRADE, done=False)
    col = mem.collection("facts")
    got = col.get(ids=[item_id], include=["documents", "metadatas", "embeddings"])
    col.upsert(
        ids=[new_id],
        embeddings=[list(got["embeddings"][0])],
        documents=got["documents"],
        metadatas=[{**got["metadatas"][0], **meta}],
    )


def test_content_ids_upgrade_merges_dated_duplicates(store):
    with LongTermMemory(store, HashEmbedder()) as mem:
        fact = mem.add_fact("Releases are tagged vYYYY.MM", "run a", trust=0.5, topic=TOPIC)
        alone = mem.curate("Keep fixtures small", topic=TOPIC, origin_event_id="e1")
        earlier = {"confirmed_ts": 1000.0, "confirmations": 2, "hit_count": 1, "trust": 0.5}
        later = {
            "confirmed_ts": 2000.0,
            "confirmations": 3,
            "hit_count": 4,
            "trust": 1.0,
            "source": "harness",
        }
        legacy_copy(
            mem, fact, "mem_20250101_aaaaaa", created_at="2025-01-01T00:00:00+00:00", **earlier
        )
        legacy_copy(mem, fact, "mem_20250201_bbbbbb", **later)
        legacy_copy(mem, alone, "mem_20250301_cccccc")
        mem.forget(fact)
        mem.forget(alone)
        assert len(facts(mem)) == 3
        assert mem.upgrade_ids() == 3  # three dated ids went
        assert mem.upgrade_ids() == 0  # nothing is left to upgrade
        stored = facts(mem)
        assert set(stored) == {fact, alone}
        meta = stored[fact][1]
        assert meta["confirmations"] == 5 and meta["hit_count"] == 5  # every one counted
        assert meta["trust"] == 1.0 and meta["source"] == "harness"  # the most trusted
        assert meta["created_at"] == "2025-01-01T00:00:00+00:00"  # the first
        assert meta["confirmed_ts"] == 2000.0
        assert meta["id_upgrade"] == CONTENT_UPGRADE
        assert meta["merged_ids"] == "mem_20250101_aaaaaa,mem_20250201_bbbbbb"
        assert stored[alone][1]["merged_ids"] == "mem_20250301_cccccc"
        found = mem.recall("Releases are tagged", kind="fact", min_score=0.3, topics=[TOPIC])
        assert [r.id for r in found] == [fact]
        mem.add_fact("Releases are tagged vYYYY.MM", "run b", topic=TOPIC)
        assert facts(mem)[fact][1]["confirmations"] == 6


def test_an_older_export_imported_again_after_the_upgrade_is_stored_already(store, tmp_path):
    """Each older id an item was merged from stays named on it, through later merges; an
    export under those ids, imported again, adds nothing the next upgrade would count twice."""
    with LongTermMemory(store, HashEmbedder()) as mem:
        fact = mem.add_fact("Logs rotate daily", "run a", topic=TOPIC)
        legacy_copy(mem, fact, "mem_20250101_eeeeee", confirmations=3, hit_count=7)
        mem.forget(fact)
        first = tmp_path / "first.jsonl"
        mem.export(first)
        mem.forget("mem_20250101_eeeeee")
        mem.add_fact("Logs rotate daily", "run b", topic=TOPIC)
        legacy_copy(mem, fact, "mem_20250201_ffffff", confirmations=2, hit_count=1)
        mem.forget(fact)
        second = tmp_path / "second.jsonl"
        mem.export(second)
        mem.forget("mem_20250201_ffffff")
        mem.import_(first)
        mem.upgrade_ids()
        mem.import_(second)
        mem.upgrade_ids()  # merged from two older ids, one upgrade after the other
        meta = facts(mem)[fact][1]
        merged = {fact, "mem_20250101_eeeeee", "mem_20250201_ffffff"}
        assert set(meta["merged_ids"].split(",")) == merged
        assert (meta["confirmations"], meta["hit_count"]) == (5, 8)
        for export in (first, second, first):
            mem.import_(export)
            assert list(facts(mem)) == [fact]
            mem.upgrade_ids()
            assert (facts(mem)[fact][1]["confirmations"], facts(mem)[fact][1]["hit_count"]) == (
                5,
                8,
            )


def test_a_write_before_the_upgrade_confirms_the_dated_item(store):
    with LongTermMemory(store, HashEmbedder()) as mem:
        fact = mem.add_fact("Docs build with mkdocs", "run a", topic=TOPIC)
        legacy_copy(mem, fact, "mem_20250101_dddddd")
        mem.forget(fact)
        assert mem.add_fact("Docs build with mkdocs", "run b", topic=TOPIC) == "mem_20250101_dddddd"
        assert list(facts(mem)) == ["mem_20250101_dddddd"]
        assert facts(mem)["mem_20250101_dddddd"][1]["confirmations"] == 2


def hold_lock(store: Path) -> int:
    """Take the store's write lock as another run would (a descriptor of its own)."""
    fd = os.open(store / FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_store_busy_past_the_bound_sends_the_writes_to_the_outbox(store, tmp_path):
    LongTermMemory(store, HashEmbedder()).close()  # the store exists
    outbox = Outbox(tmp_path / "memory-outbox.jsonl", str(store))
    notices: list[str] = []
    mem = LongTermMemory(store, HashEmbedder(), write_wait_s=0.2)
    busy = FallbackLongTerm(lambda: mem, notices.append, outbox=outbox)
    fd = hold_lock(store)
    try:
        with pytest.raises(StoreBusy, match="busy"):
            mem.add_fact("direct", "run a")
        assert busy.add_fact("Lint with ruff check", "run a", topic=TOPIC) == ""
        busy.curate("Keep the CLI thin", topic=TOPIC, origin_event_id="e1")
    finally:
        os.close(fd)
        mem.close()
    assert len(notices) == 1 and "busy" in notices[0] and "kept for the next run" in notices[0]
    assert len(outbox.path.read_text().splitlines()) == 2
    with LongTermMemory(store, HashEmbedder()) as later:
        sent: list[str] = []
        FallbackLongTerm(lambda: later, sent.append, outbox=outbox).add_fact("x y", "run b")
        assert "sent 2 write(s)" in sent[0]
        docs = {d for d, _ in facts(later).values()}
    assert docs == {"Lint with ruff check", "Keep the CLI thin", "x y"}
    assert not outbox.path.exists()


def test_a_store_opened_to_read_waits_for_the_writer(store, tmp_path):
    # Chroma's reads save the index too: read beside a write, the index grew until the disk
    # was full (tests/memory/test_reads_wait_for_writes.py)
    with LongTermMemory(store, HashEmbedder()) as mem:
        mem.add_fact("Lint with ruff check", "run a", topic=TOPIC)
    fd = hold_lock(store)  # a run or an import writing meanwhile
    try:
        with pytest.raises(StoreBusy):  # opened to read, it waits, then gives up
            LongTermMemory(store, HashEmbedder(), write_wait_s=0.2, reads_only=True)
        with pytest.raises(StoreBusy):  # opened to write too
            LongTermMemory(store, HashEmbedder(), write_wait_s=0.2).add_fact("x", "run b")
    finally:
        os.close(fd)
    with LongTermMemory(store, HashEmbedder(), write_wait_s=0.2, reads_only=True) as reader:
        assert reader.counts()["facts"] == 1
        assert reader.export(tmp_path / "all.jsonl") == 1
        assert [r.text for r in reader.recall("how to lint", min_score=0.0)] == [
            "Lint with ruff check"
        ]


def test_a_client_opened_before_another_process_wrote_reads_that_write(store):
    with LongTermMemory(store, HashEmbedder()) as mine:
        mine.add_fact("The first fact is about parsing", "run a")
        assert mine.recall("tokens lexer", min_score=0.5) == []
        other = (
            f"import sys; sys.path[:0] = [{str(TESTS)!r}, {str(TESTS.parent)!r}]; "
            "from agent_cli.memory.longterm.chroma import LongTermMemory; "
            "from embedkit import HashEmbedder; "
            f"m = LongTermMemory({str(store)!r}, HashEmbedder()); "
            "[m.add_fact(f'The lexer splits tokens {w}', 'run b') for w in ('one', 'two', 'three')]; "
            "m.close()"
        )
        done = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        found = mine.recall("the lexer splits tokens", k=5, min_score=0.5)
        assert len(found) == 3  # from a client opened again: the old one predates them
        mine.add_fact("The second fact is about parsing", "run a")
        assert len(facts(mine)) == 5


def test_the_write_lock_is_never_followed_through_a_link(store, tmp_path):
    LongTermMemory(store, HashEmbedder()).close()
    (store / FILE).unlink(missing_ok=True)
    (store / FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StorageError, match="link"):
        LongTermMemory(store, HashEmbedder())
    assert not (tmp_path / "elsewhere").exists()


def test_an_outbox_another_run_is_sending_is_left_to_it(store, tmp_path):
    outbox = Outbox(tmp_path / "memory-outbox.jsonl", str(store))
    outbox.keep("add_fact", ("Format with ruff format", "run a"), {"topic": TOPIC})
    outbox.lock_path.touch()
    fd = os.open(outbox.lock_path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another run, sending
    with LongTermMemory(store, HashEmbedder()) as mem:
        try:
            assert outbox.send(mem).sent == 0
            assert len(outbox.path.read_text().splitlines()) == 1  # still there, for that run
        finally:
            os.close(fd)
        assert outbox.send(mem).sent == 1
        assert [d for d, _ in facts(mem).values()] == ["Format with ruff format"]
    assert not outbox.path.exists()


def test_the_snapshot_holds_what_another_process_confirmed_meanwhile(store):
    from agent_cli.memory.longterm import snapshot

    with LongTermMemory(store, HashEmbedder()) as first:
        fact = first.add_fact("Releases are tagged vYYYY.MM", "run a")
    mine = LongTermMemory(store, HashEmbedder())
    try:
        mine.add_fact("Docs build with mkdocs", "run a")  # the snapshot as it was is kept
        other = (
            f"import sys; sys.path[:0] = [{str(TESTS)!r}, {str(TESTS.parent)!r}]; "
            "from agent_cli.memory.longterm.chroma import LongTermMemory; "
            "from embedkit import HashEmbedder; "
            f"m = LongTermMemory({str(store)!r}, HashEmbedder()); "
            "m.add_fact('Releases are tagged vYYYY.MM', 'run b', trust=1.0); m.close()"
        )
        done = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        mine.add_fact("Lint with ruff", "run a")
    finally:
        mine.close()
    cols = snapshot.load(store)
    assert cols is not None
    got = cols["facts"].get(ids=[fact], include=["metadatas"])
    assert got["metadatas"][0]["confirmations"] == 2  # the other process's confirmation
