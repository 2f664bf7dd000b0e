"""How much of each model request the provider's prompt cache can reuse, against append-and-trim.

Run: python bench/prefix.py   (deterministic script; about a minute)
     python bench/prefix.py --window 4096   (the server says a 4,096-token window, as
     llama.cpp serving a small local model with `-c 4096` does)
     python bench/prefix.py --save requests.json   (also writes the task requests, for
     bench/prefix_llama.py to replay to a real llama.cpp server)
     python bench/prefix.py --long   (a long session: three tasks of 72 tool calls over 27
     modules each, so that working memory is full and evicting for most of each task)

A real `agent run` (a process, the real executor, working memory, tools, git) works in a copy of
this repository against the loopback fake server, which plays a scripted model: three tasks of
29 tool calls each, mixed like a real run (whole-file reads, searches over the package, edits,
test runs that fail until the task's edits are in, a command that keeps failing, notes,
recalls). Every request the server receives is tokenized (o200k_base, the tools schema then
each message) and compared with the request before it:

- prefix share: the longest common token prefix over the request's length, within a task;
- cache-aware prompt cost: tokens not in the previous request's prefix at full price, those in
  it at (1 - discount), for discounts of 0%, 50% and 90%;
- the baseline is the classic transcript: the same system prompt, the task, then every tool call
  and its result appended (the same results the agent saw: a result the agent's request points
  to in its working memory is taken from there), the oldest dropped past 96k tokens (with
  `--window`, past what one request may take).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from agent_cli.core import tokens
from agent_cli.llm.fake_server import Behaviour, FakeOpenAIServer
from agent_cli.llm.server.info import fit_window

ROOT = Path(__file__).resolve().parent.parent
TRIM_AT = 96_000
SETTINGS = (8000, 3000, 4096)  # memory_max_tokens, tool_output_max_tokens, reserved_output_tokens
MEMORY_BUDGET = SETTINGS[0]
DISCOUNTS = (0.0, 0.5, 0.9)
CALLS_PER_TASK = 30
FILES_PER_TASK = 9
TASKS = 3
LONG = (80, 27)  # --long: at most 80 calls (72 in the script) over 27 modules per task
SMOKE_TEST = """def test_adds():
    assert 1 + 1 == 2


def test_joins():
    assert "-".join("ab") == "a-b"
"""
ACCEPT = "python -m pytest -q smoke"
TASK_RE = re.compile(r"NOW: task (\d+) of \d+, attempt (\d+)")


def make_repo(where: Path) -> Path:
    """A git repository holding a copy of this project's package and docs, and a smoke test."""
    repo = where / "project"
    shutil.copytree(
        ROOT / "agent_cli", repo / "agent_cli", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "docs", repo / "docs")
    (repo / "smoke").mkdir()
    (repo / "smoke" / "test_smoke.py").write_text(SMOKE_TEST)
    for task in range(TASKS):
        (repo / "smoke" / f"test_part_{task + 1}.py").write_text(smoke_test(repo, task))
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "bench@example.com"],
        ["config", "user.name", "Bench"],
        ["add", "-A"],
        ["commit", "-q", "-m", "initial"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return repo


def _unique_lines(text: str) -> list[str]:
    """Lines that occur once in `text` and are long enough to edit."""
    lines = text.splitlines()
    return [
        line
        for line in lines
        if len(line.strip()) > 30 and lines.count(line) == 1 and '"""' not in line
    ]


def task_sources(repo: Path, task: int) -> list[str]:
    """The FILES_PER_TASK modules a task reviews."""
    sources = sorted(
        p.relative_to(repo).as_posix()
        for p in (repo / "agent_cli").rglob("*.py")
        if len(p.read_text().splitlines()) > 40
    )
    return sources[task * FILES_PER_TASK : (task + 1) * FILES_PER_TASK]


def smoke_test(repo: Path, task: int) -> str:
    """A test that fails until the task has marked its three edited modules reviewed."""
    edited = task_sources(repo, task)[1::3]
    return (
        f"from pathlib import Path\n\n\ndef test_part_{task + 1}_is_reviewed():\n"
        f"    texts = {{p: Path(p).read_text() for p in {edited!r}}}\n"
        f"    assert [p for p, t in texts.items() if '# reviewed' not in t] == []\n"
    )


def task_calls(repo: Path, task: int) -> list[dict]:
    """The tool calls of one task, the last one finish."""
    files = task_sources(repo, task)
    test = f"python -m pytest -q smoke/test_part_{task + 1}.py"
    calls: list[dict] = []
    for i, path in enumerate(files):
        calls.append(_call("read_file", path=path))
        if i % 2 == 0:
            calls.append(
                _call(
                    "search", pattern=f"def {'_' if i % 4 else ''}[a-z]+\\(self", path="agent_cli"
                )
            )
        if i % 3 == 1:
            calls.append(_call("run", cmd=test))
            lines = _unique_lines((repo / path).read_text())
            line = lines[(task + i) % len(lines)]
            calls.append(_call("edit_file", path=path, old=line, new=line + "  # reviewed"))
        if i % 4 == 3:
            calls.append(_call("note", text=f"{path}: reviewed in task {task + 1}, keep its API"))
    calls += [
        _call("run", cmd="pytset -q smoke"),
        _call("run", cmd="pytset -q smoke"),
        _call("run", cmd=test),
        _call("run", cmd="git status --short"),
        _call("recall", query=f"what does {Path(files[0]).stem} define?"),
        _call("read_file", path=files[0], start_line=1, end_line=40),
    ]
    return calls[: CALLS_PER_TASK - 1] + [_call("finish", summary=f"task {task + 1} done")]


def _call(tool: str, **args) -> dict:
    return {"tool": tool, "args": args}


class ScriptedModel:
    """Answers each request by what it offers: a plan, the next call of the task it names, a
    kept plan between tasks, no facts, a one-line summary."""

    def __init__(self, repo: Path, tasks: int = TASKS) -> None:
        self.queues = [task_calls(repo, t) for t in range(tasks)]
        self.plan = {
            "goal": GOAL,
            "success_criteria": "smoke tests pass",
            "tasks": [
                {
                    "goal": f"Review part {t + 1} of the package",
                    "acceptance": "smoke tests pass",
                    "acceptance_cmd": f"python -m pytest -q smoke/test_part_{t + 1}.py",
                }
                for t in range(tasks)
            ],
        }

    def __call__(self, body: dict) -> dict:
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if "submit_plan" in offered:
            return {"tool": "submit_plan", "args": self.plan}
        if "revise_plan" in offered:
            return {"tool": "revise_plan", "args": {"keep": True}}
        if "submit_facts" in offered:
            return {"tool": "submit_facts", "args": {"facts": []}}
        if not offered:
            return {"content": "Reviewed the package."}
        match = TASK_RE.search(body["messages"][-1]["content"] or "")
        queue = self.queues[int(match.group(1)) - 1] if match else []
        return queue.pop(0) if queue else _call("finish", summary="nothing left")


GOAL = "Review the package module by module and keep the smoke tests passing"


def run_agent(repo: Path, url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_"))}
    env.update(
        OPENAI_API_KEY="sk-bench",
        OPENAI_BASE_URL=url,
        AGENT_MODEL="gpt-4o-mini",
        AGENT_RC=os.devnull,  # no user settings
        HOME=str(repo.parent / "home"),
        NO_COLOR="1",
        AGENT_TASK_MAX_STEPS=str(CALLS_PER_TASK + 10),
        AGENT_MAX_STEPS=str(TASKS * (CALLS_PER_TASK + 10) + 80),
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    return subprocess.run(
        [sys.executable, "-m", "agent_cli", "run", GOAL, "--yes", "--json", "--accept", ACCEPT],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


_encode = None


def encode(text: str) -> list[int]:
    global _encode
    if _encode is None:
        _encode = tokens.get_encoding().encode_ordinary
    return _encode(text)


def message_text(message: dict) -> str:
    """One chat message as the text a chat template would lay out."""
    text = f"<{message['role']}>\n{message.get('content') or ''}"
    if message.get("tool_calls"):
        text += "\n" + json.dumps(message["tool_calls"], sort_keys=True)
    return text + "\n"


def request_tokens(body: dict) -> list[int]:
    """The request's tokens: its tools schema, then its messages."""
    head = json.dumps(body.get("tools") or [], sort_keys=True) + "\n"
    return encode(head + "".join(message_text(m) for m in body["messages"]))


def shared(a: list[int], b: list[int]) -> int:
    """The length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on equal prefixes (list slices compare in C)
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def execution_requests(requests: list[dict]) -> list[tuple[tuple[int, int] | None, dict]]:
    """(task and attempt, body) of every request made while carrying out a task."""
    out = []
    for body in requests:
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if "finish" in offered:
            match = TASK_RE.search(body["messages"][-1]["content"] or "")
            out.append(((int(match.group(1)), int(match.group(2))) if match else None, body))
    return out


def agent_costs(steps) -> tuple[list[int], list[int], list[float]]:
    """Tokens and cached tokens of each request, and prefix shares within a task."""
    sizes, cached, shares = [], [], []
    prev_key, prev = None, []
    for key, body in steps:
        toks = request_tokens(body)
        common = shared(prev, toks)
        sizes.append(len(toks))
        cached.append(common)
        if key == prev_key:
            shares.append(common / len(toks))
        prev_key, prev = key, toks
    return sizes, cached, shares


_POINTER = re.compile(
    r"^\(in WORKING MEMORY: (\[[a-z_]+ m\d+\])"
    r"(?:, the same result \d+ times now)?\)"
)


def pointed_result(content: str, memory: str) -> str | None:
    """The result a tool message points to (`agent.ask.request.POINTER`), read back from the
    memory block it was sent with, then any text after the pointer; None for no pointer."""
    match = _POINTER.match(content)
    if not match:
        return None
    start = memory.index("\n", memory.index(match.group(1))) + 1
    end = memory.index("</tool_output>", start) + len("</tool_output>")
    return memory[start:end] + content[match.end() :]


def full_result(message: dict, body: dict) -> dict:
    """A tool message as a transcript would carry it: a pointer to a working-memory item is
    replaced by that item's text (the fenced result) from the same request."""
    if message["role"] != "tool":
        return message
    memory = next(
        (
            m["content"]
            for m in body["messages"]
            if str(m.get("content") or "").startswith("WORKING MEMORY:")
        ),
        "",
    )
    result = pointed_result(str(message.get("content") or ""), memory)
    return message if result is None else {**message, "content": result}


def baseline_costs(steps) -> tuple[list[int], list[int]]:
    """Tokens and cached tokens of the append-and-trim transcript at the same steps."""
    first = steps[0][1]
    tools = len(encode(json.dumps(first.get("tools") or [], sort_keys=True) + "\n"))
    head = [first["messages"][0], {"role": "user", "content": GOAL}]
    head_size = tools + sum(len(encode(message_text(m))) for m in head)
    log: list[tuple[int, int]] = []  # (message number, tokens)
    sizes, cached, prev, serial, prev_key = [], [], [], 0, None
    for key, body in steps:
        new = [full_result(m, body) for m in body["messages"] if m["role"] in ("assistant", "tool")]
        if key != prev_key:
            new.append({"role": "user", "content": body["messages"][-1]["content"]})
        for message in new:
            serial += 1
            log.append((serial, len(encode(message_text(message)))))
        while head_size + sum(n for _, n in log) > TRIM_AT and len(log) > 1:
            log.pop(0)
        ids = [i for i, _ in log]
        common = next(
            (at for at, (a, b) in enumerate(zip(prev, ids, strict=False)) if a != b),
            min(len(prev), len(ids)),
        )
        sizes.append(head_size + sum(n for _, n in log))
        cached.append(head_size + sum(n for _, n in log[:common]))
        prev, prev_key = ids, key
    return sizes, cached


def bound_shares(steps, sizes: list[int]) -> list[float | None]:
    """The prefix share each request within a task would have if nothing but its newest part
    were new: the previous tool call, the result it brought (sent once, wherever it sits), the
    task, state and goal. What is left between this and the measured share is what evictions,
    the cold list and notes cost."""
    out: list[float | None] = []
    prev_key = None
    for (key, body), size in zip(steps, sizes, strict=False):
        share = None  # the first request of a task or attempt: nothing to share
        if key == prev_key:
            tail = [
                full_result(m, body) for m in body["messages"] if m["role"] in ("assistant", "tool")
            ] + [body["messages"][-1]]
            share = 1 - sum(len(encode(message_text(m))) for m in tail) / size
        out.append(share)
        prev_key = key
    return out


def unshared_parts(steps, sizes: list[int], cached: list[int]) -> str:
    """Where the tokens not in the previous request's prefix sit, within a task."""
    exchange = tail = total = 0
    prev_key = None
    for (key, body), size, common in zip(steps, sizes, cached, strict=False):
        if key == prev_key:
            total += size - common
            exchange += sum(
                len(encode(message_text(m)))
                for m in body["messages"]
                if m["role"] in ("assistant", "tool")
            )
            tail += len(encode(message_text(body["messages"][-1])))
        prev_key = key
    rest = max(total - exchange - tail, 0)
    return (
        f"tokens not in the previous request's prefix, within a task: {total:,}: the "
        f"previous tool call and its result {exchange / total:.0%}, task, state and goal "
        f"{tail / total:.0%}, working memory (new items, and everything after an eviction) "
        f"{rest / total:.0%}"
    )


def reuse_line(steps, chunk: int = 64) -> str:
    """The prefix share if the cache also took back, shifted into place, each run of `chunk` or
    more tokens of the previous request that comes next in this one (llama.cpp's
    `--cache-reuse`, as bench/prefix_llama.py's reused() walks it)."""
    from prefix_llama import reused  # beside this script

    shares, prev, prev_key = [], [], None
    for key, body in steps:
        toks = request_tokens(body)
        if key == prev_key:
            shares.append(reused(prev, toks, chunk) / len(toks))
        prev, prev_key = toks, key
    return (
        f"the same with a cache that also shifts back runs of {chunk}+ tokens found after a "
        f"removed part (llama.cpp --cache-reuse {chunk}): median "
        f"{statistics.median(shares):.1%}, mean {statistics.mean(shares):.1%}"
    )


def cost(sizes: list[int], cached: list[int], discount: float) -> float:
    return sum(s - c + c * (1 - discount) for s, c in zip(sizes, cached, strict=False))


def memory_checks(steps) -> tuple[int, bool]:
    """The largest working-memory part of any request, and whether every request held the
    latest edits (up to 10) made before it: as edit items in working memory, or as the
    edit_file calls of the steps since its last eviction batch, which follow it."""
    largest, edits_kept, made = 0, True, set()
    for _, body in steps:
        parts = [
            m["content"]
            for m in body["messages"]
            if str(m.get("content") or "").startswith(("WORKING MEMORY:", "PINNED NOTES:"))
        ]
        largest = max(largest, sum(len(encode(p.split("\n", 1)[1])) for p in parts))
        memory = next((p for p in parts if p.startswith("WORKING MEMORY:")), "")
        calls = {
            c["id"]
            for m in body["messages"]
            for c in m.get("tool_calls") or []
            if c["function"]["name"] == "edit_file"
        }
        made |= calls
        edits_kept &= memory.count("[edit m") + len(calls) >= min(10, len(made))
    return largest, edits_kept


def report(steps, proc: subprocess.CompletedProcess, requests: int) -> None:
    sizes, cached, shares = agent_costs(steps)
    base_sizes, base_cached = baseline_costs(steps)
    calls = {}
    for _, body in steps:
        for m in body["messages"]:
            for c in m.get("tool_calls") or []:
                calls[c["function"]["name"]] = calls.get(c["function"]["name"], 0) + 1
    largest, edits_kept = memory_checks(steps)
    tasks = len({key for key, _ in steps})
    counted = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
    print(
        f"agent run: exit {proc.returncode}, {requests} requests, {len(steps)} while carrying "
        f"out {tasks} tasks; tool calls: {counted}"
    )
    half = sorted(sizes[len(sizes) // 2 :])
    print(
        f"request size, second half of the run: min {half[0]}, median {half[len(half) // 2]}, "
        f"max {half[-1]} tokens; largest working memory part {largest} (budget "
        f"{MEMORY_BUDGET}); "
        f"latest edits in every request: {edits_kept}"
    )
    print(
        f"prefix share with the previous request, within a task: median "
        f"{statistics.median(shares):.1%}, mean {statistics.mean(shares):.1%} "
        f"(target: median >= 85%)"
    )
    print(reuse_line(steps))
    bounds = bound_shares(steps, sizes)
    bound = [b for b in bounds if b is not None]
    bound_cached = [
        c if b is None else int(s * b) for s, c, b in zip(sizes, cached, bounds, strict=False)
    ]
    print(
        f"the same if only the newest call, its result, the task, state and goal were new "
        f"(the bound for this layout and workload): median {statistics.median(bound):.1%}, "
        f"mean {statistics.mean(bound):.1%}"
    )
    print(unshared_parts(steps, sizes, cached))
    print(
        f"prompt tokens over the run: agent {sum(sizes):,}, append-and-trim at {TRIM_AT:,} "
        f"{sum(base_sizes):,} ({sum(base_sizes) / sum(sizes):.1f}x more)"
    )
    for discount in DISCOUNTS:
        ours, theirs = cost(sizes, cached, discount), cost(base_sizes, base_cached, discount)
        best = cost(sizes, bound_cached, discount)
        print(
            f"cache-aware prompt cost at a {discount:.0%} discount on cached tokens: agent "
            f"{ours:,.0f}, append-and-trim {theirs:,.0f}: {theirs / ours:.1f}x lower "
            f"(at the bound: {theirs / best:.1f}x)"
        )
    print("targets: >= 6x lower at 50%, >= 3x lower at 90%")


def local_window(window: int) -> tuple[Behaviour, int, int]:
    """How the fake server acts for `--window`, as llama.cpp does (it says its window at
    `GET /props` and answers a longer request with its overflow error), and the two sizes that
    follow from the window: what one request may take (where append-and-trim trims) and the
    run's working-memory budget (`llm.server.info.fit_window`)."""
    reply = min(SETTINGS[2], window // 4)  # what the run keeps for the answer (ask.window)
    memory, _, _ = fit_window(window, *SETTINGS)
    return Behaviour(n_ctx=window), window - reply, memory


def main(argv: list[str] | None = None) -> int:
    global TRIM_AT, MEMORY_BUDGET, CALLS_PER_TASK, FILES_PER_TASK
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--window",
        type=int,
        help="have the server say this context window, as a small local model's llama.cpp "
        "server does (the run then sizes memory and tool output to it)",
    )
    parser.add_argument(
        "--save", type=Path, help="write the requests made while carrying out tasks here (JSON)"
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help=f"a long session: 72 tool calls (at most {LONG[0]}) over {LONG[1]} modules a task",
    )
    args = parser.parse_args(argv)
    if args.long:
        CALLS_PER_TASK, FILES_PER_TASK = LONG
    behaviour = None
    if args.window:
        behaviour, TRIM_AT, MEMORY_BUDGET = local_window(args.window)
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        model = ScriptedModel(repo)
        scripted = sum(len(queue) for queue in model.queues)
        with FakeOpenAIServer(model, behaviour=behaviour) as server:
            proc = run_agent(repo, server.url)
            requests = server.chat_requests
    steps = execution_requests(requests)
    if len(steps) < scripted * 0.9:
        print(
            f"the run made only {len(steps)} task requests (exit {proc.returncode}):\n"
            f"{proc.stderr[-2000:]}",
            file=sys.stderr,
        )
        return 1
    if args.save:
        args.save.write_text(json.dumps([{"task": key, "body": body} for key, body in steps]))
    report(steps, proc, len(requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
