"""protoprompt 0.20.0's agent WorkingMemory fed a workload beside ours, in the same run.

The two are fed in turns, a block of 50 items each (the blocks wm_runs.run_memory checks the
context after), so that a machine slowing down or speeding up (a loaded VM's CPU time per add
moved by up to 2x between runs when each memory was fed its whole run alone) weighs on both.

protoprompt is a bench-only dependency: `pip install protoprompt==0.20.0`. Without it the bench
says so and compares with the in-repo baseline only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from wm_runs import SIZES, Result, run_memory
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


class ProtoFeed:
    """protoprompt's agent WorkingMemory (its defaults: regex token counter, in-memory cold
    store) fed block by block beside ours: each call adds the items of one block and keeps its
    CPU time, shared evenly by the block's items (the blocks are timed as ours are).

    Its warning on each add once pinned notes alone fill the budget is silenced: writing it to
    the terminal would be counted as its add time."""

    def __init__(self, budget: int) -> None:
        from protoprompt.agent import WorkingMemory as ProtoMemory
        from protoprompt.store.memory import InMemStore as ProtoStore

        self.cpu: list[float] = []
        self._log = logging.getLogger("protoprompt")
        self._level = self._log.level
        self._log.setLevel(logging.ERROR)
        self._loop = asyncio.new_event_loop()
        self._mem = ProtoMemory(store=ProtoStore(), max_tokens=budget)
        self._loop.run_until_complete(
            self._mem.set_goal("make the job scheduler retry failed jobs with backoff")
        )

    def __call__(self, items: list[tuple[str, str, str]]) -> None:
        self._loop.run_until_complete(self._feed(items))

    async def _feed(self, items: list[tuple[str, str, str]]) -> None:
        start = time.process_time()
        for kind, text, summary in items:
            if kind == "note":
                await self._mem.note(text)
            else:
                await self._mem.add(kind, text, summary=summary)
        self.cpu.extend([(time.process_time() - start) / len(items)] * len(items))

    def close(self) -> None:
        """Close the event loop and give protoprompt's logger its level back."""
        self._loop.close()
        self._log.setLevel(self._level)

    def row(self) -> ProtoRow:
        """Its add cost over every item fed."""
        n = len(self.cpu)
        return ProtoRow(n, sum(self.cpu) / n * 1e6, sum(self.cpu[n - n // 5 :]) / (n // 5) * 1e6)


def side_by_side(
    session: Session, label: str, budget: int
) -> tuple[list[Result], list[float] | None]:
    """Our rows at each size, each run with a protoprompt memory fed the same blocks between
    ours (so that what slows this machine down slows both), and the add ratios printed against
    the target; the ratios are None when protoprompt is not installed."""
    version = protoprompt_version()
    if version is None:
        print(
            "protoprompt is not installed, so it is left out: pip install "
            f"protoprompt=={PROTOPROMPT} to run it side by side"
        )
        return [run_memory(session, n, label, budget=budget) for n in SIZES], None
    if version != PROTOPROMPT:
        print(f"note: protoprompt {version} is installed; the target compares with {PROTOPROMPT}")
    mems, protos = [], []
    for n in SIZES:
        feed = ProtoFeed(budget)
        try:
            mems.append(run_memory(session, n, label, budget=budget, beside=feed))
        finally:
            feed.close()
        protos.append(feed.row())
    return mems, [_ratio(version, row, mem) for row, mem in zip(protos, mems, strict=True)]


def _ratio(version: str, row: ProtoRow, mem: Result) -> float:
    """Print one size's comparison and return the ratio."""
    ratio = row.add_us / mem.add_us
    print(
        f"  protoprompt {version} agent WorkingMemory, {row.items} items: add "
        f"{row.add_us:.1f} µs/item cpu (last 1/5: {row.tail_us:.1f}); working memory "
        f"{mem.add_us:.1f}: {ratio:.1f}x faster (target >= {TARGET}x)"
    )
    return ratio
