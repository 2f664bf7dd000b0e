"""Four processes writing one long-term memory at once: nothing lost, nothing duplicated, no lock errors.

Each writer is a real Python process (tests/memwriterkit.py) using the run's own memory stack;
they start together on a signal file and write overlapping items: the same facts, notes and
procedures (which must merge into one each) and facts of their own (which must all be there).
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.curation import content_id, key_of
from agent_cli.memory.longterm.place import ChromaServer
from embedkit import HashEmbedder
from memwriterkit import TOPIC, own_fact, shared_command, shared_fact, shared_note

pytestmark = pytest.mark.slow  # each writer is a Python process running a script
WRITERS = 4
ITEMS = 10  # per writer: 10 x (2 facts, 1 note, 1 procedure, hits) and an episode
KIT = Path(__file__).resolve().parent.parent / "memwriterkit.py"


def run_writers(tmp_path: Path, **where: str) -> list[dict]:
    """Start the writers, let them go at once, and return each one's report (and its stderr)."""
    start = tmp_path / "go"
    procs = []
    for me in range(WRITERS):
        spec = tmp_path / f"writer{me}.json"
        spec.write_text(
            json.dumps(
                {
                    **where,
                    "writer": me,
                    "items": ITEMS,
                    "start": str(start),
                    "outbox": str(tmp_path / f"outbox{me}.jsonl"),
                }
            )
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(KIT), str(spec)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    time.sleep(1.0)  # every writer has imported what it needs and waits for the signal
    start.touch()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        assert "locked" not in out + err and "busy" not in out + err, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["errors"] == [] and report["notices"] == [], report
        reports.append(report)
    assert not list(tmp_path.glob("outbox*.jsonl"))  # nothing had to wait for a later run
    return reports


def expected_documents() -> dict[str, str]:
    """Each distinct item's text -> its kind."""
    out = {}
    for n in range(ITEMS):
        out[shared_fact(n)] = "fact"
        out[shared_note(n)] = "note"
        for me in range(WRITERS):
            out[own_fact(me, n)] = "fact"
    return out


def check_store(mem: LongTermMemory, confirmations: tuple[int, int]) -> None:
    """Every distinct item once, under its content id, findable by its own vector."""
    col = mem.collection("facts")
    got = col.get(include=["documents", "metadatas", "embeddings"])
    docs = collections.Counter(got["documents"])
    assert max(docs.values()) == 1, [d for d, c in docs.items() if c > 1][:5]  # nothing duplicated
    by_doc = dict(zip(got["documents"], got["metadatas"], strict=True))
    for text, kind in expected_documents().items():  # nothing lost
        assert text in by_doc, text
        assert by_doc[text]["kind"] == kind
    procedures = {m["command"]: m for m in got["metadatas"] if m["kind"] == "procedure"}
    assert set(procedures) == {shared_command(n) for n in range(ITEMS)}
    assert len(got["ids"]) == len(expected_documents()) + ITEMS
    low, high = confirmations
    for n in range(ITEMS):
        for meta in (by_doc[shared_fact(n)], by_doc[shared_note(n)], procedures[shared_command(n)]):
            assert low <= meta["confirmations"] <= high, meta
    for item_id, doc, meta, vec in zip(
        got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
    ):
        assert item_id == content_id(key_of(doc, meta))
        found = col.query(query_embeddings=[list(vec)], n_results=3, include=[])
        assert item_id in found["ids"][0]  # the vector index holds every record
    assert mem.counts()["episodes"] == WRITERS


def test_four_writers_share_the_embedded_store(tmp_path):
    store = tmp_path / "chroma"
    run_writers(tmp_path, path=str(store))
    with LongTermMemory(store, HashEmbedder()) as mem:
        # one writer at a time: every confirmation of a shared item counted, none lost
        check_store(mem, confirmations=(WRITERS, WRITERS))
        assert len(mem.recall(shared_fact(3), k=3, topics=[TOPIC])) >= 1


def test_four_writers_share_a_chroma_server(tmp_path, chroma_server, chroma_database):
    run_writers(tmp_path, url=chroma_server.url, database=chroma_database)
    server = ChromaServer(chroma_server.url, database=chroma_database)
    with LongTermMemory(server, HashEmbedder()) as mem:
        # writers race on a server: one record per item, and a confirmation made at the very
        # moment another writer confirmed may count once (see README, "Shared memory")
        check_store(mem, confirmations=(1, WRITERS))
