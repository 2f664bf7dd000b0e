"""protoprompt 0.20.0's agent WorkingMemory fed a workload, beside ours, in the same run.

protoprompt is a bench-only dependency: `pip install protoprompt==0.20.0`. Without it the bench
says so and compares with the in-repo baseline only.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from dataclasses import dataclass

from wm_runs import Result
from wm_workload import Session

PROTOPROMPT = "0.20.0"
TARGET = 10  # the add speed-up over protoprompt that issue 22 asks for


def protoprompt_version() -> str | None:
    """The installed protoprompt's version, or None."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("protoprompt")
    except PackageNotFoundError:
        return None


@dataclass
class ProtoRow:
    """protoprompt's add cost after `items` adds: mean CPU µs per add, and over the last fifth."""

    items: int
    add_us: float
    tail_us: float


def run_protoprompt(session: Session, sizes: tuple[int, ...], budget: int) -> list[ProtoRow]:
    """Feed the session to protoprompt's agent WorkingMemory (its defaults: regex token counter,
    in-memory cold store); a row at each size, from one run.

    Its warning on each add once pinned notes alone fill the budget is silenced: writing it to
    the terminal would be counted as its add time."""
    from protoprompt.agent import WorkingMemory as ProtoMemory
    from protoprompt.store.memory import InMemStore as ProtoStore

    async def feed() -> list[float]:
        mem = ProtoMemory(store=ProtoStore(), max_tokens=budget)
        await mem.set_goal("make the job scheduler retry failed jobs with backoff")
        times = []
        for kind, text, summary in session.items[: max(sizes)]:
            start = time.process_time()
            if kind == "note":
                await mem.note(text)
            else:
                await mem.add(kind, text, summary=summary)
            times.append(time.process_time() - start)
        return times

    log = logging.getLogger("protoprompt")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        gc.collect()
        times = asyncio.run(feed())
    finally:
        log.setLevel(level)
    return [
        ProtoRow(n, sum(times[:n]) / n * 1e6, sum(times[n - n // 5 : n]) / (n // 5) * 1e6)
        for n in sizes
    ]


def compare(session: Session, mems: list[Result], budget: int) -> list[float] | None:
    """Run protoprompt on `session` at the sizes of `mems` (our rows on it) and print each add
    ratio against the target; the ratios, or None when protoprompt is not installed."""
    version = protoprompt_version()
    if version is None:
        print(
            "protoprompt is not installed, so it is left out: pip install "
            f"protoprompt=={PROTOPROMPT} to run it side by side"
        )
        return None
    if version != PROTOPROMPT:
        print(f"note: protoprompt {version} is installed; the target compares with {PROTOPROMPT}")
    ratios = []
    rows = run_protoprompt(session, tuple(m.items for m in mems), budget)
    for row, mem in zip(rows, mems, strict=True):
        ratios.append(row.add_us / mem.add_us)
        print(
            f"  protoprompt {version} agent WorkingMemory, {row.items} items: add "
            f"{row.add_us:.1f} µs/item cpu (last 1/5: {row.tail_us:.1f}); working memory "
            f"{mem.add_us:.1f}: {ratios[-1]:.1f}x faster (target >= {TARGET}x)"
        )
    return ratios
