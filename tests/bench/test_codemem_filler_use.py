"""The benchmark's distractors: used (recalled into runs) as often as the learned items of
their kind; made when the runs A learned nothing; not told from the pairs' items by form."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "codemem"))

import scenarios
import stores
from learn import Learned

from agent_cli.agent.learn import rules
from conftest import git, make_repo

PAIR = scenarios.Pair(
    id="p-procedure-1",
    project="p",
    need="procedure",
    a_goal="Add a test that alpha keeps empty input",
    b_goal="run the alpha tests for me",
    a_test="from pkg import alpha\n\n\ndef test_alpha_empty():\n    assert alpha('') == ''\n",
)
TESTS = ("alpha_basic", "beta_edge", "gamma_order", "delta_sign", "epsilon_round", "zeta_wrap")


def _project(tmp_path: Path) -> Path:
    """A small project on `main`: its first commit, then the test file run A wrote."""
    repo = tmp_path / "proj"
    (repo / "tests").mkdir(parents=True)
    (repo / "pkg.py").write_text(
        "".join(f'def {n}(x):\n    """Do {n}."""\n    return x\n\n\n' for n in ("alpha", "beta"))
    )
    (repo / "tests" / "test_pkg.py").write_text(
        "".join(f"def test_{t}():\n    pass\n\n\n" for t in TESTS)
    )
    make_repo(repo)
    (repo / "tests" / "test_bench_p_procedure_1.py").write_text(PAIR.a_test)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "run A's test")
    return repo


def _scenario() -> scenarios.Scenario:
    real = scenarios.load_all()[0]
    return scenarios.Scenario(
        **{
            **real.__dict__,
            "test_dir": "tests",
            "test_cmd": "python -m pytest -q {file}",
            "sources": ("pkg.py",),
            "tests": ("tests/test_pkg.py",),
            "pairs": (PAIR,),
        }
    )


def _exported(kind: str, n: int, hits: int, topic: str) -> dict:
    """A record as the agent's `export` writes it (the keys of each kind as it stores them)."""
    run = f"20261208-00324{n}-ab{n}{n}"
    meta = {
        "confirmations": 1,
        "confirmed_at": f"2026-12-08T00:32:4{n}+00:00",
        "confirmed_ts": 1796689960.0 + n,
        "created_at": f"2026-12-08T00:32:4{n}+00:00",
        "expires_ts": 9e15,
        "gist": f"{kind} {n}",
        "kind": kind,
        "origin_event_id": "",
        "run_id": run,
        "text_hash": f"{n:016x}",
        "topic": topic,
        "topic_alt": "",
        "trust": 0.5,
        "ttl_days": 0.0,
    }
    if hits:
        meta.update(hit_count=hits, last_hit_at="2026-12-08T00:33:00+00:00", last_hit_ts=1.0)
    if kind == "procedure":
        meta.update(command="python -m pytest -q x.py", files="{}", task="a goal", trust=1.0)
        meta["source"] = f"harness, run {run}"
    elif kind == "note":
        meta.update(origin_event_id=f"{run}/m2", task="a goal", ttl_days=90.0)
        meta["source"] = f"run {run}"
    else:
        meta.update(files="{}", source=f"model, run {run}")
    return {
        "collection": "facts",
        "id": f"mem_{n:016x}",
        "document": f"{kind} {n}",
        "metadata": meta,
    }


def _learned(tmp_path: Path, records: bool = True) -> Learned:
    repo = _project(tmp_path)
    topic = "git:" + git(repo, "rev-list", "--max-parents=0", "main").strip()
    made = [
        _exported(kind, 3 * n + k, hits, topic)
        for n, hits in enumerate((9, 0, 3))
        for k, kind in enumerate(("fact", "note", "procedure"))
    ]
    return Learned(_scenario(), repo, made if records else [], {}, [])


def test_each_distractor_is_used_as_often_as_a_learned_item_of_its_kind(tmp_path):
    got = stores.fillers(_learned(tmp_path), 60)
    counts = {r["metadata"].get("hit_count", 0) for r in got}
    assert counts == {0, 3, 9}  # not all 9, the first record's
    for rec in got:
        if not rec["metadata"].get("hit_count"):
            assert "last_hit_at" not in rec["metadata"] and "last_hit_ts" not in rec["metadata"]


def test_distractors_and_the_poison_are_made_when_the_runs_a_learned_nothing(tmp_path):
    learned = _learned(tmp_path, records=False)
    root = git(learned.repo, "rev-list", "--max-parents=0", "main").strip()
    got = stores.fillers(learned, 40)
    assert {r["metadata"]["kind"] for r in got} == {"fact", "note", "procedure"}
    assert {r["metadata"]["topic"] for r in got} == {f"git:{root}"}  # this repository's
    poison = stores.poison(learned)
    assert poison["document"] == stores.POISON_TEXT
    assert poison["metadata"]["topic"] == f"git:{root}"
    store = stores.contents(learned, 10, PAIR.id)
    assert sum(stores.counted(r) for r in store) == 10


def _all(learned: Learned) -> list[dict]:
    return stores.fillers(learned, len(stores.texts(learned, random.Random(7))))


def test_a_share_of_the_distractor_notes_read_as_rules_of_the_repository(tmp_path):
    notes = [r for r in _all(_learned(tmp_path)) if r["metadata"]["kind"] == "note"]
    ruled = [r for r in notes if rules.is_rule(SimpleNamespace(kind="note", text=r["document"]))]
    assert 0.25 <= len(ruled) / len(notes) <= 0.4
    assert any(r["document"].startswith(("Convention:", "Pitfall:")) for r in ruled)


def test_distractor_procedures_run_the_test_files_the_runs_a_wrote_with_other_tests(tmp_path):
    procs = [r for r in _all(_learned(tmp_path)) if r["metadata"]["kind"] == "procedure"]
    mine = [r for r in procs if "tests/test_bench_p_procedure_1.py::" in r["metadata"]["command"]]
    assert mine and len(mine) < len(procs)
    for rec in mine:
        test = rec["metadata"]["command"].split("::")[1]
        assert "alpha" not in test  # another test and goal than the pair's own
        assert json.loads(rec["metadata"]["files"]).keys() == {"tests/test_bench_p_procedure_1.py"}


def test_distractors_have_the_shape_of_the_learned_items_of_their_kind(tmp_path):
    learned = _learned(tmp_path)
    used = {r["metadata"]["kind"]: r for r in learned.records if r["metadata"].get("hit_count")}
    for rec in _all(learned):
        meta, kind = rec["metadata"], rec["metadata"]["kind"]
        if meta.get("hit_count"):
            assert meta.keys() == used[kind]["metadata"].keys(), kind
        assert (
            re.fullmatch(r"mem_[0-9a-f]{16}", rec["id"]) and rec["id"] == f"mem_{meta['text_hash']}"
        )
        assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", meta["run_id"])
        if kind == "procedure":
            assert rec["document"].endswith(f"(the harness saw it exit 0 after: {meta['task']})")
        if kind in ("fact", "procedure"):
            assert all(re.fullmatch(r"[0-9a-f]{40}", b) for b in json.loads(meta["files"]).values())
