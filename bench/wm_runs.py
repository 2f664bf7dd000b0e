"""Feeding a workload to working memory and to the append-then-trim baseline, and the table.

The baseline is the classic tutorial agent's context: append each message, re-count every
message with tiktoken, drop the oldest while over budget. Both see the same items and the same
checks: every CHECK_EVERY items the context size and how many of the 10 latest edits are in it.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from dataclasses import dataclass, field

from agent_cli.core import tokens
from agent_cli.memory import InMemStore, WorkingMemory
from wm_workload import GOAL, Session

BUDGET = 4000
SIZES = (2000, 10_000)
CHECK_EVERY = 50
RECALL_SAMPLE = 200


class Transcript:
    """The baseline: append, re-count every message with tiktoken, drop the oldest when over."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.messages: list[tuple[int, str]] = []  # (item index, message)

    def add(self, index: int, kind: str, text: str, summary: str) -> None:
        self.messages.append((index, f"[{kind}] {summary}\n{text}\n"))
        while sum(tokens.count(m) for _, m in self.messages) > self.max_tokens:
            self.messages.pop(0)

    def assemble(self) -> tuple[str, int, set[int]]:
        text = "\n".join(m for _, m in self.messages)
        return text, tokens.count(text), {i for i, _ in self.messages}

    def recall(self, name: str) -> bool:
        return any(name in m for _, m in self.messages)


@dataclass
class Result:
    """One row of the report; times are CPU time of this process unless marked wall."""

    label: str
    items: int
    add_us: float
    add_wall_us: float
    add_tail_us: float  # per item over the last fifth of the run: flat means no growth
    assemble_ms: float
    recall_ms: float
    hits: str
    recent_min: int
    recent_mean: float
    largest: int


@dataclass
class Tally:
    """What a run has seen so far: add times, context checks."""

    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    recent: list[int] = field(default_factory=list)
    largest: int = 0

    def timed(self, fn, *args):
        """Call fn(*args), keeping its CPU and wall time."""
        cpu, wall = time.process_time(), time.perf_counter()
        out = fn(*args)
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)
        return out

    def block(self, cpu: float, wall: float, items: int) -> None:
        """Keep the times of a block of `items` calls timed together, shared evenly."""
        self.cpu.extend([cpu / items] * items)
        self.wall.extend([wall / items] * items)

    def check(self, session: Session, upto: int, tokens_seen: int, present) -> None:
        """Record the context size and how many of the 10 latest edits are in it."""
        self.largest = max(self.largest, tokens_seen)
        recent = [i for i in session.edit_names if i <= upto][-10:]
        if len(recent) == 10:
            self.recent.append(sum(present(i) for i in recent))

    def result(self, label: str, n: int, assemble_ms: float, recall_ms: float, hits: str):
        """A report row for the first `n` items."""
        cpu = self.cpu[:n]
        return Result(
            label,
            n,
            mean_us(cpu),
            mean_us(self.wall[:n]),
            mean_us(cpu[-n // 5 :]),
            assemble_ms,
            recall_ms,
            hits,
            min(self.recent),
            statistics.mean(self.recent),
            self.largest,
        )


def run_memory(
    session: Session, n: int, label: str, store=None, budget: int = BUDGET, beside=None
) -> Result:
    """Feed `n` items to a WorkingMemory in blocks of CHECK_EVERY, checking the context after
    each; `beside(block)`, when given, is called with each block's items after it (another
    memory fed the same items in the same conditions, wm_proto.py).

    A block's adds (and the tick after each, one per tool call) are timed together and the
    time shared evenly by its items: two clock reads per add were some 5% of an add."""
    mem = WorkingMemory(store=store or InMemStore(), max_tokens=budget)
    mem.set_goal(GOAL)
    ids: dict[int, str] = {}
    tally = Tally()
    gc.collect()
    items = session.items[:n]
    for start in range(0, n, CHECK_EVERY):
        block = items[start : start + CHECK_EVERY]
        cpu, wall = time.process_time(), time.perf_counter()
        for i, (kind, text, summary) in enumerate(block, start):
            ids[i] = mem.add(kind, text, summary)
            mem.tick()
        tally.block(time.process_time() - cpu, time.perf_counter() - wall, len(block))
        ctx = mem.assemble()
        in_ctx = {item.id for item in ctx.items}
        tally.check(session, start + len(block) - 1, ctx.tokens, lambda j: ids[j] in in_ctx)
        if beside is not None:
            beside(block)
    assemble_ms = median_ms(mem.assemble, 20)
    hits, recall_ms = _recall_evicted(mem, session, ids, n)
    return tally.result(label, n, assemble_ms, recall_ms, hits)


def _recall_evicted(mem: WorkingMemory, session: Session, ids: dict[int, str], n: int):
    """Look up evicted edits by their function name: (hits, mean CPU ms per recall)."""
    hot = {item.id for item in mem.hot_items()}
    evicted = [i for i in session.edit_names if i < n and ids[i] not in hot]
    sample = random.Random(1).sample(evicted, min(RECALL_SAMPLE, len(evicted)))
    found, times = 0, []
    for i in sample:
        start = time.process_time()
        restored = mem.recall(f"what does {session.edit_names[i]} do?", k=1)
        times.append(time.process_time() - start)
        found += ids[i] in restored
    return f"{found}/{len(sample)}", statistics.mean(times) * 1e3


def run_baseline(
    session: Session, sizes: tuple[int, ...], label: str, budget: int = BUDGET
) -> list[Result]:
    """Feed items to the transcript baseline with the same checks; a row at each size."""
    tr, tally, rows = Transcript(budget), Tally(), []
    gc.collect()
    for i, (kind, text, summary) in enumerate(session.items[: max(sizes)]):
        tally.timed(tr.add, i, kind, text, summary)
        if i % CHECK_EVERY == CHECK_EVERY - 1 or i + 1 in sizes:
            _, count, present = tr.assemble()
            tally.check(session, i, count, present.__contains__)
        if i + 1 in sizes:
            rows.append(_baseline_row(tr, tally, session, i + 1, label))
    return rows


def _baseline_row(tr: Transcript, tally: Tally, session: Session, n: int, label: str) -> Result:
    """The baseline's row after `n` items: it can only find what is still in its transcript."""
    assemble_ms = median_ms(tr.assemble, 20)
    in_transcript = {i for i, _ in tr.messages}
    evicted = [i for i in session.edit_names if i < n and i not in in_transcript]
    sample = random.Random(1).sample(evicted, min(RECALL_SAMPLE, len(evicted)))
    start = time.process_time()
    found = sum(tr.recall(session.edit_names[i]) for i in sample)
    recall_ms = (time.process_time() - start) / max(len(sample), 1) * 1e3
    return tally.result(label, n, assemble_ms, recall_ms, f"{found}/{len(sample)}")


def mean_us(seconds: list[float]) -> float:
    """The mean of `seconds`, in µs."""
    return statistics.mean(seconds) * 1e6


def median_ms(fn, repeat: int) -> float:
    """The median CPU time of `repeat` calls of fn(), in ms."""
    samples = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1e3


def print_rows(rows: list[Result]) -> None:
    """The report table of `rows`."""
    print(
        f"{'':36} {'items':>6} {'add µs/item':>12} {'last 1/5':>8} {'assemble':>8} "
        f"{'recall':>7} {'evicted edits':>13} {'10 recent edits':>15} {'largest':>7}"
    )
    print(
        f"{'':36} {'':>6} {'cpu (wall)':>12} {'µs/item':>8} {'ms':>8} {'ms':>7} "
        f"{'found by name':>13} {'in ctx min/avg':>15} {'context':>7}"
    )
    for r in rows:
        add = f"{r.add_us:.1f} ({r.add_wall_us:.0f})"
        print(
            f"{r.label:36} {r.items:>6} {add:>12} {r.add_tail_us:>8.1f} {r.assemble_ms:>8.3f} "
            f"{r.recall_ms:>7.3f} {r.hits:>13} {f'{r.recent_min}/{r.recent_mean:.2f}':>15} "
            f"{r.largest:>7}"
        )
