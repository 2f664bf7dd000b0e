"""Working memory against the append-then-trim transcript, on a workload shaped like a coding session.

Run: python bench/working_memory.py   (deterministic workload; timings are this machine's)
For the side-by-side run: pip install protoprompt==0.20.0 (a bench-only dependency; without it
the bench says so and compares with the baseline only).

The baseline is the classic tutorial agent's context: append each message, re-count every
message with tiktoken, drop the oldest while over budget (wm_runs.py). Both see the same items
(wm_workload.py); wm_large.py adds the large-items workload, and wm_pressure.py issue 22's
workload (items of about 1.2 KB, notes included), each beside protoprompt.
"""

from __future__ import annotations

import gc
import math
import os
import re
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

import wm_large
import wm_pressure
from agent_cli.core import tokens
from agent_cli.memory import SqliteStore, WorkingMemory
from agent_cli.memory.working.names.symbols import definitions, identifiers
from wm_runs import (
    BUDGET,
    SIZES,
    Result,
    Tally,
    mean_us,
    print_rows,
    run_baseline,
    run_memory,
)
from wm_workload import MIX, PINNED_MIX, Session, make_session


def _floor(session: Session) -> str:
    """CPU µs per item of the steps inside add() that do not depend on the memory, timed alone.

    Counting the text and its header line with tiktoken is the floor: the exact count is required.
    """
    texts = [text for _, text, _ in session.items]
    headers = [f"[{kind} m{i + 1}] {summary}" for i, (kind, _, summary) in enumerate(session.items)]
    parts = []
    for name, fn, inputs in (
        ("tiktoken count: text", tokens.count, texts),
        ("header", tokens.count, headers),
        ("definitions (skeleton/ast/regex)", definitions, texts),
        ("identifiers", identifiers, texts),
    ):
        start = time.process_time()
        for text in inputs:
            fn(text)
        parts.append(f"{name} {(time.process_time() - start) / len(inputs) * 1e6:.1f}")
    return "per item, inside add(): " + ", ".join(parts) + " µs"


def _control(session: Session) -> str:
    """The last fifth of the 10,000 items fed to an empty memory: same items, small store."""
    n = max(SIZES)
    mem, tally = WorkingMemory(max_tokens=BUDGET), Tally()
    gc.collect()
    for kind, text, summary in session.items[n - n // 5 : n]:
        tally.timed(mem.add, kind, text, summary)
        mem.tick()
    return (
        f"control: items {n - n // 5 + 1}-{n} into an empty memory: "
        f"{mean_us(tally.cpu):.1f} µs/item (compare 'last 1/5' of the {n} run)"
    )


class HashEmbedder:
    """Bag of words hashed into 256 buckets with crc32, unit length: deterministic and offline."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * 256
            for word in re.findall(r"[a-z]+", text.lower()):
                vec[zlib.crc32(word.encode()) % 256] += 1.0
            norm = math.sqrt(sum(x * x for x in vec)) or 1.0
            out.append([x / norm for x in vec])
        return out


def _meaning(session: Session) -> str:
    """Meaning recall over every cold vector of the 10,000-item run (embedder time excluded)."""
    mem = WorkingMemory(max_tokens=BUDGET, embedder=HashEmbedder(), recall_cooldown_steps=5)
    for kind, text, summary in session.items:
        mem.add(kind, text, summary)
        mem.tick()
    queries = ["worker job queue took", "assertion error got failed", "grep payload retries"]
    mem.recall(queries[0], k=3)  # loads the vectors once
    embed, total = mem.embedder.embed, 0.0
    for i in range(60):
        query = f"{queries[i % 3]} {i}"
        vector = embed([query])
        mem.embedder.embed = lambda texts, v=vector: v  # time the search, not the embedder
        start = time.process_time()
        mem.recall(query, k=3)
        total += time.process_time() - start
        mem.embedder.embed = embed
    return (
        f"meaning channel: recall over {mem.stats()['cold']} cold vectors (256 dims), "
        f"embedder excluded: {total / 60 * 1e3:.3f} ms"
    )


def _ratios(base: Result, mem: Result) -> str:
    return (
        f"  {mem.label}, {mem.items} items vs baseline at {base.items}: "
        f"add {base.add_us / mem.add_us:.1f}x faster, "
        f"assemble {base.assemble_ms / mem.assemble_ms:.2f}x, "
        f"10 latest edits in context (min) {mem.recent_min} vs {base.recent_min}, "
        f"evicted edits found {mem.hits} vs {base.hits}"
    )


def main() -> int:
    tokens.count("warm up the tokenizer")
    started = time.perf_counter()
    session = make_session(max(SIZES), MIX)
    pinned = make_session(max(SIZES), PINNED_MIX, seed=11)
    sizes = [tokens.count(text) for _, text, _ in session.items]
    print(
        f"workload: {len(session.items)} items, {min(sizes)}-{max(sizes)} tokens "
        f"(mean {statistics.mean(sizes):.0f}), budget {BUDGET} tokens, one tick per item, "
        f"no embedder (meaning channel off)"
    )
    print(
        f"times are CPU time of this process, wall in brackets; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n"
    )
    bases = run_baseline(session, SIZES, "baseline: append-then-trim")
    mems = [run_memory(session, n, "working memory (InMemStore)") for n in SIZES]
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "cold.sqlite")
        sqlite_row = run_memory(session, max(SIZES), "working memory (SqliteStore)", store)
        store.close()
    base_p = run_baseline(pinned, (SIZES[0],), "baseline, 17% notes")[0]
    mem_p = run_memory(pinned, max(SIZES), "working memory, 17% notes (pinned)")
    print_rows([bases[0], mems[0], bases[1], mems[1], sqlite_row, base_p, mem_p])
    print("\n" + _floor(session))
    print(_control(session))
    print(_meaning(session))
    print("\nratios vs baseline:")
    for base, mem in [
        (bases[0], mems[0]),
        (bases[1], mems[1]),
        (bases[1], sqlite_row),
        (base_p, mem_p),
    ]:
        print(_ratios(base, mem))
    rows = bases + mems + [sqlite_row, base_p, mem_p]
    print(f"\nbudget never exceeded: {all(r.largest <= BUDGET for r in rows)}")
    wm_large.report()  # the large-items workload and protoprompt, side by side
    wm_pressure.report()  # issue 22's workload and its note-heavy mix, beside protoprompt
    print(f"\nbench time {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
