"""The generated coding-session workload that the working-memory benches feed.

Deterministic: the same seed gives the same items (kind, text, summary), edits defining
functions that later items call, grep, log and test about.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

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


def function_name(rng: random.Random, i: int) -> str:
    """A function name made of a verb, a noun and `i`."""
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}_{i}"


def pick_name(rng: random.Random, known: list[str], default: str = "main") -> str:
    """A known function name: mostly one of the latest, sometimes any older one."""
    if not known:
        return default
    return rng.choice(known[-15:]) if rng.random() < 0.8 else rng.choice(known)


def function_source(name: str, known: list[str], rng: random.Random, prefix: str = "") -> str:
    """A Python function of a few lines that calls some known functions."""
    body = [
        f"{prefix}def {name}(value, limit={rng.randrange(2, 9)}):",
        f'{prefix}    """{name.replace("_", " ")} for the scheduler."""',
    ]
    for j in range(rng.randrange(3, 9)):
        callee = pick_name(rng, known, "int")
        body.append(f"{prefix}    step_{j} = {callee}(value) + {rng.randrange(100)}")
    body.append(f"{prefix}    return step_{j} if step_{j} < limit else None")
    return "\n".join(body) + "\n"


def _log(rng: random.Random, known: list[str]) -> str:
    """A log of a few lines."""
    lines = []
    for _ in range(rng.randrange(2, 8)):
        job = rng.randrange(10_000)
        who = pick_name(rng, known) if rng.random() < 0.3 else "worker"
        lines.append(
            f"2025-03-0{rng.randrange(1, 9)} 12:{rng.randrange(60):02d}:{rng.randrange(60):02d} "
            f"INFO {who} job={job} queue=q{rng.randrange(9)} took {rng.randrange(900)}ms"
        )
    return "\n".join(lines)


def _tool_output(rng: random.Random, known: list[str]) -> str:
    """A grep over the sources."""
    lines = [f"$ grep -rn {pick_name(rng, known)} src/"]
    for _ in range(rng.randrange(4, 18)):
        name = pick_name(rng, known)
        lines.append(
            f"src/sched/mod{rng.randrange(40)}.py:{rng.randrange(400)}:    "
            f"result = {name}(payload, retries={rng.randrange(5)})"
        )
    return "\n".join(lines)


def _test_result(rng: random.Random, known: list[str]) -> str:
    """A failing pytest run."""
    name = pick_name(rng, known)
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
            name = function_name(rng, i)
            code = function_source(name, known, rng, prefix="+" if i % 2 else "")
            text = (
                f"--- a/src/sched/mod{i % 40}.py\n+++ b/src/sched/mod{i % 40}.py\n{code}"
                if i % 2
                else code
            )
            session.edit_names[i] = name
            known.append(name)
            summary = f"edit src/sched/mod{i % 40}.py: {name}"
        elif kind == "file":
            names = [function_name(rng, i * 10 + j) for j in range(rng.randrange(2, 4))]
            text = "\n\n".join(function_source(nm, known, rng) for nm in names)
            known.extend(names)
            summary = f"read src/sched/mod{i % 40}.py"
        elif kind == "note":
            about = pick_name(rng, known, "the scheduler")
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


SESSION_MIX = {
    "log": 0.35,
    "tool_output": 0.30,
    "file": 0.12,
    "test_result": 0.13,
    "edit": 0.05,
    "note": 0.05,
}
KB_LINES = {"log": (16, 30), "tool_output": (14, 29)}  # randrange bounds: items near 1.2 KB
KB_FUNCTIONS = (3, 6)


def _lines(rng: random.Random, kind: str, known: list[str]) -> str:
    """A log or a grep output of KB_LINES lines."""
    want = rng.randrange(*KB_LINES[kind])
    make = _log if kind == "log" else _tool_output
    lines: list[str] = []
    while len(lines) < want:
        lines.extend(make(rng, known).splitlines()[1 if lines and kind != "log" else 0 :])
    return "\n".join(lines[:want])


def make_kb_session(n: int, mix: dict[str, float], seed: int = 13) -> Session:
    """Like make_session(), but logs of 16-29 lines, grep outputs of 14-28 and file reads of
    3-5 functions: with SESSION_MIX, items of about 1.2 KB on average (issue 22's workload)."""
    session = make_session(n, mix, seed=seed)
    rng, known = random.Random(seed + 1), []
    for i, (kind, _, summary) in enumerate(session.items):
        if i in session.edit_names:
            known.append(session.edit_names[i])
        if kind in KB_LINES:
            text = _lines(rng, kind, known)
            session.items[i] = (kind, text, text.splitlines()[0][:60])
        elif kind == "file":
            names = [function_name(rng, i * 10 + j) for j in range(rng.randrange(*KB_FUNCTIONS))]
            text = "\n\n".join(function_source(name, known, rng) for name in names)
            known.extend(names)
            session.items[i] = (kind, text, summary)
    return session
