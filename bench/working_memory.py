"""Working memory against the append-then-trim transcript, on a workload shaped like a coding session.

Run: python bench/working_memory.py   (deterministic workload; timings are this machine's)
For the side-by-side run: pip install protoprompt==0.20.0 (a bench-only dependency; without it
the bench says so and compares with the baseline only).

The baseline is the classic tutorial agent's context: append each message, re-count every
message with tiktoken, drop the oldest while over budget. Both see the same items.
"""

from __future__ import annotations

import gc
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from agent_cli.core import tokens
from agent_cli.memory import InMemStore, SqliteStore, WorkingMemory
from agent_cli.memory.working.symbols import definitions, identifiers

BUDGET = 4000
SIZES = (2000, 10_000)
CHECK_EVERY = 50
RECALL_SAMPLE = 200
GOAL = "make the job scheduler retry failed jobs with backoff and report attempts"
MIX = {
    "log": 0.35,
    "tool_output": 0.30,
    "file": 0.12,
    "test_result": 0.12,
    "edit": 0.08,
    "note": 0.03,
}
PINNED_MIX = {
    "log": 0.30,
    "tool_output": 0.25,
    "file": 0.10,
    "test_result": 0.10,
    "edit": 0.08,
    "note": 0.17,
}
VERBS = [
    "parse",
    "load",
    "save",
    "retry",
    "schedule",
    "render",
    "compute",
    "validate",
    "merge",
    "fetch",
    "encode",
    "split",
]
NOUNS = [
    "job",
    "header",
    "queue",
    "token",
    "config",
    "report",
    "cache",
    "batch",
    "record",
    "window",
    "limit",
    "user",
]


@dataclass
class Session:
    """A generated session: items (kind, text, summary) and the function each edit defines."""

    items: list[tuple[str, str, str]] = field(default_factory=list)
    edit_names: dict[int, str] = field(default_factory=dict)  # item index -> defined name


def _name(rng: random.Random, i: int) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}_{i}"


def _pick(rng: random.Random, known: list[str], default: str = "main") -> str:
    """A known function name: mostly one of the latest, sometimes any older one."""
    if not known:
        return default
    return rng.choice(known[-15:]) if rng.random() < 0.8 else rng.choice(known)


def _function(name: str, known: list[str], rng: random.Random, prefix: str = "") -> str:
    """A Python function of a few lines that calls some known functions."""
    body = [
        f"{prefix}def {name}(value, limit={rng.randrange(2, 9)}):",
        f'{prefix}    """{name.replace("_", " ")} for the scheduler."""',
    ]
    for j in range(rng.randrange(3, 9)):
        callee = _pick(rng, known, "int")
        body.append(f"{prefix}    step_{j} = {callee}(value) + {rng.randrange(100)}")
    body.append(f"{prefix}    return step_{j} if step_{j} < limit else None")
    return "\n".join(body) + "\n"


def _log(rng: random.Random, known: list[str]) -> str:
    lines = []
    for _ in range(rng.randrange(2, 8)):
        job = rng.randrange(10_000)
        who = _pick(rng, known) if rng.random() < 0.3 else "worker"
        lines.append(
            f"2025-03-0{rng.randrange(1, 9)} 12:{rng.randrange(60):02d}:{rng.randrange(60):02d} "
            f"INFO {who} job={job} queue=q{rng.randrange(9)} took {rng.randrange(900)}ms"
        )
    return "\n".join(lines)


def _tool_output(rng: random.Random, known: list[str]) -> str:
    lines = [f"$ grep -rn {_pick(rng, known)} src/"]
    for _ in range(rng.randrange(4, 18)):
        name = _pick(rng, known)
        lines.append(
            f"src/sched/mod{rng.randrange(40)}.py:{rng.randrange(400)}:    "
            f"result = {name}(payload, retries={rng.randrange(5)})"
        )
    return "\n".join(lines)


def _test_result(rng: random.Random, known: list[str]) -> str:
    name = _pick(rng, known)
    out = [f"$ pytest -q tests/test_{name}.py", "." * rng.randrange(5, 40) + "F"]
    out += [
        f"    assert {name}({rng.randrange(9)}) == {rng.randrange(9)}",
        f"E   AssertionError: got {rng.randrange(99)}",
        f"FAILED tests/test_{name}.py::test_{name} - AssertionError",
        f"1 failed, {rng.randrange(5, 60)} passed in 0.{rng.randrange(10, 99)}s",
    ]
    return "\n".join(out)


def make_session(n: int, mix: dict[str, float], seed: int = 7) -> Session:
    """A deterministic session of `n` items drawn from `mix`."""
    rng = random.Random(seed)
    session, known = Session(), []
    kinds, weights = list(mix), list(mix.values())
    for i in range(n):
        kind = rng.choices(kinds, weights)[0]
        if kind == "edit":
            name = _name(rng, i)
            code = _function(name, known, rng, prefix="+" if i % 2 else "")
            text = (
                f"--- a/src/sched/mod{i % 40}.py\n+++ b/src/sched/mod{i % 40}.py\n{code}"
                if i % 2
                else code
            )
            session.edit_names[i] = name
            known.append(name)
            summary = f"edit src/sched/mod{i % 40}.py: {name}"
        elif kind == "file":
            names = [_name(rng, i * 10 + j) for j in range(rng.randrange(2, 4))]
            text = "\n\n".join(_function(nm, known, rng) for nm in names)
            known.extend(names)
            summary = f"read src/sched/mod{i % 40}.py"
        elif kind == "note":
            about = _pick(rng, known, "the scheduler")
            text = (
                f"{about} must keep its signature; callers pass limit by keyword (checked step {i})"
            )
            summary = f"note on {about}"
        else:
            text = {"log": _log, "tool_output": _tool_output, "test_result": _test_result}[kind](
                rng, known
            )
            summary = text.splitlines()[0][:60]
        session.items.append((kind, text, summary))
    return session


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
            _mean_us(cpu),
            _mean_us(self.wall[:n]),
            _mean_us(cpu[-n // 5 :]),
            assemble_ms,
            recall_ms,
            hits,
            min(self.recent),
            statistics.mean(self.recent),
            self.largest,
        )


def run_memory(session: Session, n: int, label: str, store=None, budget: int = BUDGET) -> Result:
    """Feed `n` items to a WorkingMemory, checking the context every CHECK_EVERY items."""
    mem = WorkingMemory(store=store or InMemStore(), max_tokens=budget)
    mem.set_goal(GOAL)
    ids: dict[int, str] = {}
    tally = Tally()
    gc.collect()
    for i, (kind, text, summary) in enumerate(session.items[:n]):
        ids[i] = tally.timed(mem.add, kind, text, summary)
        mem.tick()
        if i % CHECK_EVERY == CHECK_EVERY - 1 or i == n - 1:
            ctx = mem.assemble()
            in_ctx = {item.id for item in ctx.items}
            tally.check(session, i, ctx.tokens, lambda j: ids[j] in in_ctx)
    assemble_ms = _median_ms(mem.assemble, 20)
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
    assemble_ms = _median_ms(tr.assemble, 20)
    in_transcript = {i for i, _ in tr.messages}
    evicted = [i for i in session.edit_names if i < n and i not in in_transcript]
    sample = random.Random(1).sample(evicted, min(RECALL_SAMPLE, len(evicted)))
    start = time.process_time()
    found = sum(tr.recall(session.edit_names[i]) for i in sample)
    recall_ms = (time.process_time() - start) / max(len(sample), 1) * 1e3
    return tally.result(label, n, assemble_ms, recall_ms, f"{found}/{len(sample)}")


def _mean_us(seconds: list[float]) -> float:
    return statistics.mean(seconds) * 1e6


def _median_ms(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1e3


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
        f"{_mean_us(tally.cpu):.1f} µs/item (compare 'last 1/5' of the {n} run)"
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


def _print(rows: list[Result]) -> None:
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
    _print([bases[0], mems[0], bases[1], mems[1], sqlite_row, base_p, mem_p])
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
    import wm_large  # the large-items workload and protoprompt, side by side

    wm_large.report()
    print(f"\nbench time {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
