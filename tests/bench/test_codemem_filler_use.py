"""The benchmark's distractors are used (recalled into runs) as often as the learned items of
their kind, not all as often as the one whose shape they copy."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "codemem"))

import scenarios
import stores
from learn import Learned


def _learned(tmp_path: Path) -> Learned:
    (tmp_path / "pkg.py").write_text('def alpha():\n    """A."""\n\n\ndef beta():\n    pass\n')
    (tmp_path / "test_pkg.py").write_text("def test_alpha():\n    pass\n")
    records = []
    for n, hits in enumerate((9, 0, 3)):
        for kind in ("fact", "note", "procedure"):
            meta = {"kind": kind, "run_id": f"run{n}", "created_at": f"2026-01-01T00:0{n}:00"}
            meta["confirmed_at"] = meta["created_at"]
            if hits:
                meta.update(hit_count=hits, last_hit_at="2026-01-02T00:00:00", last_hit_ts=1.0)
            records.append(
                {"collection": "facts", "id": f"{kind}{n}", "document": "x", "metadata": meta}
            )
    real = scenarios.load_all()[0]
    scn = scenarios.Scenario(
        **{**real.__dict__, "sources": ("pkg.py",), "tests": ("test_pkg.py",), "pairs": ()}
    )
    return Learned(scn, tmp_path, records, {}, [])


def test_each_distractor_is_used_as_often_as_a_learned_item_of_its_kind(tmp_path):
    got = stores.fillers(_learned(tmp_path), 60)
    counts = {r["metadata"].get("hit_count", 0) for r in got}
    assert counts == {0, 3, 9}  # not all 9, the first record's
    for rec in got:
        if not rec["metadata"].get("hit_count"):
            assert "last_hit_at" not in rec["metadata"] and "last_hit_ts" not in rec["metadata"]
