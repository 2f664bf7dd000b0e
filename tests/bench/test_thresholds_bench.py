"""bench/thresholds.py: its labelled pairs, and the offline defaults are what it measures."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import thresholds as bench
from agent_cli.memory.thresholds import OFFLINE


def test_the_pairs_hold_both_kinds_both_labels_and_hard_negatives():
    rows = bench.load(bench.PAIRS)
    assert len(rows) >= 200
    for kind in ("associate", "episode"):
        mine = [r for r in rows if r["kind"] == kind]
        labels = {r["label"] for r in mine}
        assert labels == {"related", "unrelated"}, kind
        assert any(r["why"].startswith("hard") for r in mine), kind
        assert all(r["query"].strip() and r["item"].strip() for r in mine)
        for r in mine:  # a related pair's item is among its query's related ids
            assert (r["item_id"] in r["related_ids"]) == (r["label"] == "related"), r["why"]


def test_the_offline_defaults_are_the_measure_of_the_shipped_embedder():
    rows = bench.load(bench.PAIRS)
    sims, index = bench.similarities(rows)
    for kind in ("associate", "episode"):
        mine = [r for r in rows if r["kind"] == kind]
        chosen = bench.choose(mine, sims, index, kind)
        assert bench.rule(chosen, kind) == bench.rule(OFFLINE, kind), kind
