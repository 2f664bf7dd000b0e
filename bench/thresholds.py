"""Which recall thresholds fit the offline embedder: precision and recall on labelled pairs.

    python bench/thresholds.py [--pairs bench/thresholds_pairs.jsonl]

The pairs (bench/thresholds_pairs.py builds them from this project's commits, tests and docs)
are embedded with the shipped WordLlama embedder, offline. Two rules are measured:

- associate: the top k facts, notes and procedures with cosine similarity above a threshold
  (seed 001: top 3 above 0.78);
- episodes: the past runs within a cosine distance (1 - similarity, the episode collection's
  `hnsw:space`) of the goal (seed 003: distance < 0.5).

Printed for each rule: the pairs table (every pair judged alone: precision, recall, F1, the
share of hard negatives let through) at the seed's threshold, at the one the run used before
this measure, at the offline default, and across a sweep; then the retrieval table (each query
against every stored-side text of its kind, the top k above the threshold kept; a text not
labelled related to the query counts as unrelated). The offline defaults are the sweep's
best F1 over the pairs for the floor, and the largest k for associate (`choose` says why);
the last line of each rule says whether agent_cli/memory/thresholds.py's OFFLINE matches.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.thresholds import OFFLINE, SEED, Thresholds

PAIRS = Path(__file__).resolve().parent / "thresholds_pairs.jsonl"
BEFORE = Thresholds(associate_k=10, associate_min_score=0.3, episode_max_distance=0.7)
SWEEP = [round(0.05 * i, 2) for i in range(2, 19)]  # similarity 0.10 .. 0.90
KS = (3, 5, 10)
EPISODES = 3  # the digest's episodes (agent/learn/digest.py)


@dataclass(frozen=True)
class Score:
    """Counts of one rule at one setting, and what follows from them."""

    tp: int
    fp: int
    fn: int
    hard_fp: int = 0
    hard: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    def f(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def similarities(rows: list[dict[str, Any]]) -> tuple[Any, dict[str, int]]:
    """The cosine similarity of every pair of distinct texts, and each text's row."""
    texts = sorted({r["query"] for r in rows} | {r["item"] for r in rows})
    index = {t: i for i, t in enumerate(texts)}
    vectors = WordLlamaEmbedder().embed_array(texts)
    return vectors @ vectors.T, index


def pairwise(rows: list[dict[str, Any]], sims: Any, index: dict[str, int], floor: float) -> Score:
    """Every pair alone: related when its similarity is above `floor`."""
    tp = fp = fn = hard_fp = hard = 0
    for r in rows:
        above = float(sims[index[r["query"]], index[r["item"]]]) > floor
        related = r["label"] == "related"
        tp += above and related
        fp += above and not related
        fn += related and not above
        if r["why"].startswith("hard"):
            hard += 1
            hard_fp += above
    return Score(tp, fp, fn, hard_fp, hard)


def retrieval(
    rows: list[dict[str, Any]], sims: Any, index: dict[str, int], k: int, floor: float
) -> Score:
    """Each query against every stored-side text of the kind, the top `k` above `floor` kept:
    an item is related when its id is among the query's `related_ids`; the query's own
    record (an episode of the same commit) is not in the store it searches."""
    pool = {r["item_id"]: index[r["item"]] for r in rows}
    queries = {r["query_id"]: (index[r["query"]], set(r["related_ids"])) for r in rows}
    tp = fp = fn = 0
    for query_id, (query, related) in sorted(queries.items()):
        stored = [(i, row) for i, row in pool.items() if i != query_id or i in related]
        ranked = sorted(stored, key=lambda ir: -float(sims[query, ir[1]]))
        kept = {i for i, row in ranked[:k] if float(sims[query, row]) > floor}
        relevant = {i for i, _ in stored if i in related}
        tp += len(kept & relevant)
        fp += len(kept - relevant)
        fn += len(relevant - kept)
    return Score(tp, fp, fn)


def choose(rows: list[dict[str, Any]], sims: Any, index: dict[str, int], kind: str) -> Thresholds:
    """The offline defaults this measure gives for `kind`'s rule, within `OFFLINE`.

    The floor is the sweep's best F1 over the pairs, each judged alone (ties go to the higher
    floor): the floor says whether an item is about the goal at all, and F1 weighs a missed
    item and an unrelated one alike. k is the largest the retrieval table measures (10), for
    recall: the digest sends what associate finds within its token share, beside the items
    that share names with the goal, so an unrelated line costs a line of that share while a
    missed one is memory the run never sees. Episodes keep the digest's three."""
    floor = max(SWEEP, key=lambda f: (round(pairwise(rows, sims, index, f).f(), 3), f))
    if kind == "associate":
        return replace(OFFLINE, associate_k=max(KS), associate_min_score=floor)
    return replace(OFFLINE, episode_max_distance=round(1.0 - floor, 6))


def rule(t: Thresholds, kind: str) -> tuple[int, float]:
    """The (k, similarity floor) of `kind`'s rule in `t`."""
    if kind == "associate":
        return t.associate_k, t.associate_min_score
    return EPISODES, t.episode_min_score


def line(name: str, score: Score, hard: bool = True) -> str:
    cells = f"{score.precision:9.2f} {score.recall:6.2f} {score.f():5.2f}"
    hard_cell = f" {score.hard_fp:3d}/{score.hard:<3d}" if hard else ""
    return f"  {name:<34}{cells}{hard_cell}"


def report(kind: str, rows: list[dict[str, Any]], sims: Any, index: dict[str, int]) -> None:
    """The two tables of one rule."""
    related = sum(r["label"] == "related" for r in rows)
    print(f"\n{kind}: {len(rows)} pairs ({related} related, {len(rows) - related} unrelated)")
    print(f"  {'pairs, similarity above':<34}{'precision':>9} {'recall':>6} {'F1':>5} hard FP")
    settings = [("seed", SEED), ("before", BEFORE), ("offline default", OFFLINE)]
    for name, t in settings:
        print(
            line(f"{name} ({rule(t, kind)[1]:.2f})", pairwise(rows, sims, index, rule(t, kind)[1]))
        )
    chosen = choose(rows, sims, index, kind)
    k, best = rule(chosen, kind)
    print(line(f"best pairwise F1 ({best:.2f})", pairwise(rows, sims, index, best)))
    print(f"  {'retrieval, top k above':<34}{'precision':>9} {'recall':>6} {'F1':>5}")
    for name, t in settings:
        score = retrieval(rows, sims, index, rule(t, kind)[0], rule(t, kind)[1])
        print(line(f"{name} (top {rule(t, kind)[0]} > {rule(t, kind)[1]:.2f})", score, hard=False))
    floor = best
    print(line(f"measured (top {k} > {floor:.2f})", retrieval(rows, sims, index, k, floor), False))
    print(f"  sweep{'':<8}pairs: P / R / F1 / hard FP   retrieval recall: top 3 / 5 / 10")
    for f in SWEEP:
        s = pairwise(rows, sims, index, f)
        cells = " ".join(f"{retrieval(rows, sims, index, k, f).recall:4.2f}" for k in KS)
        mark = " <" if f == floor else ""
        print(
            f"    > {f:.2f}{'':<8}{s.precision:4.2f} {s.recall:4.2f} {s.f():4.2f} "
            f"{s.hard_fp:3d}/{s.hard:<3d}{'':<17}{cells}{mark}"
        )
    agrees = "matches" if rule(chosen, kind) == rule(OFFLINE, kind) else "DIFFERS FROM"
    print(f"  the measure {agrees} agent_cli/memory/thresholds.py OFFLINE for this rule")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    args = ap.parse_args()
    rows = load(args.pairs)
    sims, index = similarities(rows)
    print(f"{len(rows)} pairs from {args.pairs.name}, embedded with {WordLlamaEmbedder.name}")
    for kind in ("associate", "episode"):
        report(kind, [r for r in rows if r["kind"] == kind], sims, index)


if __name__ == "__main__":
    main()
