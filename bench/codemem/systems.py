"""The baselines, simulated from the same records as the agent's store: what each would put
into B's requests.

- trivial: every note worded as a rule of the repository (by the agent's own test,
  `rules.is_rule`: it opens with "Convention", "Pitfall", "Never", ... or speaks of "this
  repository", "here", "every", ...) and the newest procedure of each test file (files as the
  agent's `procedures.shape` reads a command), whatever the goal; fenced as the agent fences
  retrieved memory. What a memory gets from the form of the items alone, with no ranking by
  what run B is about.

- memory_md: every learned item appended as one line to a MEMORY.md file in the order it was
  learned; the first 200 lines, at most 25 KB, are loaded into every request as the agent's
  own instructions (as Claude Code loads its auto-memory index): not fenced as data.
- vector_topk: the goal embedded with the agent's embedder, the 5 nearest items of any kind
  (cosine), no floor, no digest, no failure signatures, no staleness marks; fenced and escaped
  as the agent fences retrieved memory.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any, cast

import numpy as np

from agent_cli.agent.learn import procedures, rules
from agent_cli.core.fences import retrieved_memory
from agent_cli.core.protocols import Recalled
from agent_cli.memory.embed import WordLlamaEmbedder

MD_LINES, MD_BYTES, TOP_K = 200, 25_000, 5


def item_line(rec: dict[str, Any]) -> str:
    """The one line a MEMORY.md-style memory keeps of a record."""
    meta = rec["metadata"]
    kind = meta.get("kind") or meta.get("doc") or rec["collection"]
    text = str(meta.get("gist") or rec["document"]).replace("\n", " ")
    return f"- {kind} {rec['id']}: {text}"


def trivial(records: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The fenced block of every rule-like note and the newest procedure of each test file,
    and the ids it holds."""
    notes = [
        r
        for r in records
        if r["metadata"].get("kind") == "note"
        and rules.is_rule(cast(Recalled, SimpleNamespace(kind="note", text=r["document"])))
    ]
    newest: dict[str, dict[str, Any]] = {}
    for rec in sorted(records, key=lambda r: str(r["metadata"].get("confirmed_at", ""))):
        meta = rec["metadata"]
        if meta.get("kind") == "procedure":
            _, file, _ = procedures.shape(str(meta.get("command") or rec["document"]))
            newest[file or rec["id"]] = rec
    picked = [*notes, *newest.values()]
    return retrieved_memory("\n".join(item_line(r) for r in picked)), [r["id"] for r in picked]


def memory_md(records: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The MEMORY.md block loaded into every request, and the ids it holds."""
    # Items learned in the same second are in no particular order: a seeded shuffle, then the
    # stable sort by time, so that no kind of item is first among equals.
    shuffled = list(records)
    random.Random(11).shuffle(shuffled)
    ordered = sorted(shuffled, key=lambda r: str(r["metadata"].get("created_at", "")))
    lines, ids, used = ["# MEMORY.md"], [], 0
    for rec in ordered:
        line = item_line(rec)
        if len(lines) >= MD_LINES or used + len(line.encode()) + 1 > MD_BYTES:
            break
        lines.append(line)
        ids.append(rec["id"])
        used += len(line.encode()) + 1
    return "\n".join(lines), ids


class VectorTopK:
    """Pure nearest-neighbour recall over one store's records."""

    def __init__(self, records: list[dict[str, Any]], embedder: WordLlamaEmbedder) -> None:
        self.records = records
        self.embedder = embedder
        vecs = np.asarray(embedder.embed([r["document"] for r in records]), dtype=np.float32)
        self.vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)

    def closeness(self, goal: str, ids: set[str]) -> tuple[float, int]:
        """The best cosine of the items `ids` to `goal`, and that item's rank (1 = nearest)."""
        q = np.asarray(self.embedder.embed([goal])[0], dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-9)
        sims = self.vecs @ q
        order = {int(i): r for r, i in enumerate(np.argsort(-sims), 1)}
        best = [(float(sims[n]), order[n]) for n, r in enumerate(self.records) if r["id"] in ids]
        return max(best) if best else (0.0, 0)

    def block(self, goal: str) -> tuple[str, list[str]]:
        """The fenced top-k block for `goal`, and the ids in it."""
        q = np.asarray(self.embedder.embed([goal])[0], dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-9)
        best = np.argsort(-(self.vecs @ q))[:TOP_K]
        picked = [self.records[int(i)] for i in best]
        text = retrieved_memory("\n".join(item_line(r) for r in picked))
        return text, [r["id"] for r in picked]
