"""The stores of the coding-memory benchmark: what a store of a size holds, what is stale."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "codemem"))

import pairs_b
import scenarios
import stores
from learn import Learned

from conftest import git, make_repo


def _rec(rid: str, run: str, kind: str, collection: str = "facts", files: str = "{}") -> dict:
    meta = {"run_id": run, "created_at": f"2026-01-01T00:00:{len(rid):02d}", "files": files}
    meta["doc" if collection == "episodes" else "kind"] = kind
    return {"collection": collection, "id": rid, "document": f"text {rid}", "metadata": meta}


def _learned(tmp_path: Path) -> Learned:
    """Six pairs' records in the order an export lists them: every episode, then the rest."""
    episodes, facts, owner = [], [], {}
    for n in range(6):
        run, pair = f"run{n}", f"p-note-{n}"
        episodes += [
            _rec(run, run, "episode", "episodes"),
            _rec(f"sig{n}", run, "signature", "episodes"),
        ]
        facts += [_rec(f"note{n}", run, "note"), _rec(f"proc{n}", run, "procedure")]
        owner.update(dict.fromkeys((run, f"sig{n}", f"note{n}", f"proc{n}"), pair))
    real = scenarios.load_all()[0]
    pairs = tuple(
        scenarios.Pair(id=f"p-note-{n}", project="x", need="note", a_goal="a", b_goal="b")
        for n in range(6)
    )
    scn = scenarios.Scenario(**{**real.__dict__, "pairs": pairs})
    return Learned(scn, tmp_path, episodes + facts, owner, [])


def test_a_small_store_holds_the_pair_the_poison_and_whole_other_pairs(tmp_path):
    learned = _learned(tmp_path)
    got = stores.contents(learned, 10, "p-note-4")
    ids = [r["id"] for r in got]
    assert set(ids[:3]) == {"note4", "proc4", "run4"} and stores.POISON_ID in ids
    assert sum(stores.counted(r) for r in got) == 10
    assert {"run0", "note0", "proc0", "run1", "note1", "proc1"} <= set(ids)  # whole pairs
    assert not {"run5", "note5", "proc2"} & set(ids)
    # an episode's signature rows come with the episode, and only then
    assert {"sig4", "sig0", "sig1"} <= set(ids) and "sig5" not in ids


def test_the_needed_item_is_the_pairs_item_of_the_needed_kind(tmp_path):
    learned = _learned(tmp_path)
    pair = scenarios.Pair(id="p-note-2", project="x", need="note", a_goal="a", b_goal="b")
    assert pairs_b.needed(learned, pair) == {"note2"}
    fix = scenarios.Pair(id="p-note-2", project="x", need="fix", a_goal="a", b_goal="b")
    assert pairs_b.needed(learned, fix) == {"run2", "sig2"}


def test_an_item_is_stale_when_a_file_it_names_changed_since(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    (repo / "b.py").write_text("y = 1\n")
    make_repo(repo)

    def blob(name: str) -> str:
        return subprocess.run(
            ["git", "hash-object", name], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()

    fresh = _rec("f1", "r", "fact", files=json.dumps({"a.py": blob("a.py")}))
    old = _rec("f2", "r", "fact", files=json.dumps({"b.py": blob("b.py")}))
    gone = _rec("f3", "r", "fact", files=json.dumps({"c.py": "0" * 40}))
    (repo / "b.py").write_text("y = 2\n")
    git(repo, "commit", "-qam", "later")
    assert pairs_b.stale_ids([fresh, old, gone], repo) == {"f2", "f3"}
