"""The large-items workload, reported by bench/working_memory.py, and protoprompt 0.20.0 run on it
(wm_proto.py)."""

from __future__ import annotations

import random
import statistics

from agent_cli.core import tokens
from wm_proto import side_by_side
from wm_runs import SIZES, print_rows, run_baseline
from wm_workload import Session, function_name, function_source, make_session, pick_name

LARGE_MIX = {
    "log": 0.30,
    "file": 0.25,
    "tool_output": 0.20,
    "test_result": 0.10,
    "edit": 0.12,
    "note": 0.03,
}
LARGE_BUDGET = 8000  # the agent's default memory_max_tokens: a file of 30 functions fits


def _log30(rng: random.Random, known: list[str]) -> str:
    """A log of 30 lines."""
    lines = []
    for _ in range(30):
        who = pick_name(rng, known) if rng.random() < 0.3 else "worker"
        lines.append(
            f"2025-03-0{rng.randrange(1, 9)} 12:{rng.randrange(60):02d}:"
            f"{rng.randrange(60):02d} INFO {who} job={rng.randrange(10_000)} "
            f"queue=q{rng.randrange(9)} took {rng.randrange(900)}ms"
        )
    return "\n".join(lines)


def make_large_session(n: int, seed: int = 5) -> Session:
    """Like make_session(), but every log has 30 lines and every file read 30 functions."""
    session = make_session(n, LARGE_MIX, seed=seed)
    rng, known = random.Random(seed + 1), list(session.edit_names.values())
    for i, (kind, _, summary) in enumerate(session.items):
        if kind == "log":
            text = _log30(rng, known)
            session.items[i] = (kind, text, text.splitlines()[0][:60])
        elif kind == "file":
            names = [function_name(rng, i * 100 + j) for j in range(30)]
            text = "\n\n".join(function_source(name, known, rng) for name in names)
            known.extend(names)
            session.items[i] = (kind, text, summary)
    return session


def report() -> None:
    """The large-items workload, with protoprompt side by side when it is installed."""
    session = make_large_session(max(SIZES))
    sizes = [tokens.count(text) for _, text, _ in session.items]
    print(
        f"\nlarge items: {len(session.items)} items, logs of 30 lines, files of 30 functions, "
        f"{min(sizes)}-{max(sizes)} tokens (mean {statistics.mean(sizes):.0f}), "
        f"budget {LARGE_BUDGET} tokens"
    )
    bases = run_baseline(session, SIZES, "baseline: append-then-trim", LARGE_BUDGET)
    mems, _ = side_by_side(session, "working memory (InMemStore)", LARGE_BUDGET)
    print_rows([bases[0], mems[0], bases[1], mems[1]])
    print(
        f"budget never exceeded: {all(r.largest <= LARGE_BUDGET for r in bases + mems)}; "
        f"add, {SIZES[1]:,} vs {SIZES[0]:,} items: {mems[1].add_us / mems[0].add_us:.2f}x"
    )
