"""Recall from long-term memory: episodes and items near a query, and the fixes of failures.

Given a `Store` (store.py) and the `Curation` of its items; the same code reads Chroma's
collections and the recall snapshot's (snapshot.py).
"""

from __future__ import annotations

from typing import Any

from agent_cli.core.errors import UsageError
from agent_cli.memory.longterm.curation import ITEM_KINDS, Curation, topic_where, where
from agent_cli.memory.longterm.records import Result, public_meta
from agent_cli.memory.longterm.signatures import signature_key
from agent_cli.memory.longterm.store import Store

KINDS = ("all", "episode", *ITEM_KINDS)
MIN_SCORE = 0.3  # a recalled item is at least this close to the query


class Reader:
    """What a run reads from `store`: recall by meaning (items through `items`) and fixes."""

    def __init__(self, store: Store, items: Curation, min_score: float = MIN_SCORE) -> None:
        self.store = store
        self.items = items
        self.min_score = min_score

    def search_episodes(self, vec: Any, k: int, topics: list[str] | None = None) -> list[Result]:
        """Episodes near `vec` (of the repositories `topics` when given), one result per run,
        a failure-signature hit naming the signature."""
        best: dict[str, Result] = {}
        scope = topic_where(topics) if topics else None
        for doc_id, doc, meta, score in self.store.query("episodes", vec, k * 3, scope, scope):
            run_id = str(meta.get("run_id", doc_id))
            if run_id in best and best[run_id].score >= score:
                continue
            extra: dict[str, Any] = (
                {"matched_signature": doc} if meta.get("doc") == "signature" else {}
            )
            if "tools_used" in meta:
                extra["tools_used"] = [t for t in str(meta["tools_used"]).split(",") if t]
            signature = f" [failed before: {doc}]" if "matched_signature" in extra else ""
            gist = str(meta.get("gist", "")) + signature
            if meta.get("fix"):
                gist += f" [fixed by: {meta['fix']}]"
            best[run_id] = Result(
                score,
                "episode",
                run_id,
                doc,
                gist,
                str(meta.get("source", "")),
                str(meta.get("created_at", "")),
                {**public_meta(meta), **extra},
            )
        return list(best.values())

    def recall(
        self,
        query: str,
        k: int = 5,
        kind: str = "all",
        min_trust: float = 0.5,
        min_score: float | None = None,
        topics: list[str] | None = None,
    ) -> list[Result]:
        """The `k` most relevant episodes and facts above the relevance threshold, best first;
        of the repositories `topics` when given, else of every repository."""
        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}", f"use one of {', '.join(KINDS)}")
        self.store.require_match()
        if not query.strip() or k < 1:
            return []
        vec = self.store.embed([query])[0]
        found: list[Result] = []
        if kind in ("all", "episode"):
            found += self.search_episodes(vec, k, topics)
        if kind != "episode":
            kinds = ITEM_KINDS if kind == "all" else (kind,)
            found += self.items.search_items(vec, k, min_trust, kinds, topics)
        floor = self.min_score if min_score is None else min_score
        return sorted((r for r in found if r.score >= floor), key=lambda r: -r.score)[:k]

    def fixes_for(
        self,
        signatures: list[str],
        exclude_run: str = "",
        k: int = 3,
        topics: list[str] | None = None,
    ) -> list[Result]:
        """Earlier runs (of the repositories `topics` when given) that had one of these failures
        (same test, same kind of error) and got the task verified, newest first, each saying
        how it was fixed."""
        keys = sorted({signature_key(s) for s in signatures if s.strip()})
        if not keys:
            return []
        with self.store.guard("reading"):
            got = self.store.cols["episodes"].get(
                where=where(
                    {"doc": "signature"},
                    {"fixed": True},
                    {"sig_key": {"$in": keys}},
                    topic_where(topics) if topics else None,
                ),
                include=["documents", "metadatas"],
            )
        best: dict[str, Result] = {}
        for doc, meta in sorted(
            zip(got["documents"], got["metadatas"], strict=False),
            key=lambda dm: str(dm[1].get("created_at", "")),
            reverse=True,
        ):
            run_id = str(meta.get("run_id", ""))
            if run_id == exclude_run or run_id in best:
                continue
            gist = f'{doc} -> fixed in task "{meta.get("fix_task", "")}": {meta.get("fix", "")}'
            best[run_id] = Result(
                1.0,
                "episode",
                run_id,
                str(meta.get("fix", "")),
                gist,
                str(meta.get("source", "")),
                str(meta.get("created_at", "")),
                {**public_meta(meta), "matched_signature": doc},
                trust=0.5,  # the failure the harness saw; how it was fixed, the model's summary
            )
        return list(best.values())[:k]
