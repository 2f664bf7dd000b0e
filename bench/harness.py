"""The harness's own time per tool call, before (commit 085a731) and after (this tree), in one run.

One scripted `agent run` of one task with CALLS cheap tool calls (read_file, note,
write_file in turn, no command) and then `finish`, against a loopback FakeOpenAIServer in
this process. The server's chat handler is timed here (wrapped, not changed): when each
request's handling began and when its reply was written. The harness's time for tool call
k is from the moment the reply carrying call k was written to the moment the next request
reached the server: in between the agent reads the reply, runs the tool, records it
(memory, events, trajectory, journal or state saves) and builds and sends the next request.
So the run's wall time less the server's answering is what is counted, and no command
runs inside it: the one command, the task's acceptance check, runs after `finish`,
outside the calls measured. Process start, planning and the end of the run are not tool
calls and are not counted; what the first call pays once (imports on first use, the
long-term store opening in a background thread) is, as the mean shows it.

"Before" runs the same script with PYTHONPATH pointing at a `git worktree` of 085a731 in a
temporary directory; "after" runs this tree. Each side runs RUNS times, interleaved; the
figure is the median over runs of the mean time per call (the median per call is printed
too). Target: after <= before / 3. The machine's load shows in both figures alike.

    python bench/harness.py [--runs N] [--calls N] [--before COMMIT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_cli.llm.fake import server as fake  # noqa: E402
from agent_cli.llm.fake_server import FakeOpenAIServer  # noqa: E402

ANSWERED: list[tuple[float, float]] = []  # (handling began, reply written) of each chat request


def _timed(handle):  # type: ignore[no-untyped-def]
    def do_post(handler) -> None:  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        try:
            handle(handler)
        finally:
            if handler.path.endswith("/chat/completions"):
                ANSWERED.append((began, time.perf_counter()))

    return do_post


fake._Handler.do_POST = _timed(fake._Handler.do_POST)  # type: ignore[method-assign]

BEFORE = "085a731"


def tool_step(k: int) -> dict:
    """The model's k-th tool call (0-based): a read, a note or a small write, in turn."""
    if k % 3 == 0:
        return {"tool": "read_file", "args": {"path": "README.md"}}
    if k % 3 == 1:
        return {"tool": "note", "args": {"text": f"note {k}: README.md is one line"}}
    return {"tool": "write_file", "args": {"path": f"out/f{k}.txt", "content": f"{k}\n"}}


class ScriptedModel:
    """The fake model's script: plan, CALLS tool calls, finish; arrival times of the calls."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.served = 0
        self.at: list[int] = []  # which chat request (0-based) carried each tool call

    def __call__(self, body: dict) -> dict:
        names = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        if "submit_plan" in names:
            return {
                "tool": "submit_plan",
                "args": {
                    "goal": "write the out files",
                    "success_criteria": "out/ exists",
                    "tasks": [
                        {
                            "goal": "write the out files",
                            "acceptance": "out/ exists",
                            "acceptance_cmd": "test -d out",
                        }
                    ],
                },
            }
        if "submit_facts" in names:
            return {"tool": "submit_facts", "args": {"facts": []}}
        if not names:
            return {"content": "done"}
        k = self.served
        self.served += 1
        self.at.append(len(ANSWERED))  # this request is the next one to be answered
        if k < self.calls:
            return tool_step(k)
        return {"tool": "finish", "args": {"summary": "wrote the out files"}}

    def per_call_s(self, answered: list[tuple[float, float]]) -> list[float]:
        """For each tool call: from its reply written to the next request's handling began."""
        if len(self.at) <= self.calls:
            raise RuntimeError(f"only {len(self.at)} of {self.calls + 1} replies were asked for")
        return [answered[n + 1][0] - answered[n][1] for n in self.at[: self.calls]]


def make_repo(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# scratch\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "bench@example.com"],
        ["config", "user.name", "Bench"],
        ["add", "-A"],
        ["commit", "-q", "-m", "initial"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)


def one_run(tree: Path, calls: int, work: Path) -> list[float]:
    """Seconds of harness time of each tool call of one scripted run of the code in `tree`."""
    repo = work / "repo"
    shutil.rmtree(work, ignore_errors=True)
    make_repo(repo)
    model = ScriptedModel(calls)
    ANSWERED.clear()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_"))}
    env.update(
        PYTHONPATH=str(tree),
        HOME=str(work / "home"),
        AGENT_RC=os.devnull,  # no user settings
        AGENT_REPLAN="off",
        AGENT_FINAL_SUMMARY="false",
        AGENT_TASK_MAX_STEPS=str(calls + 5),
        NO_COLOR="1",
    )
    with FakeOpenAIServer(model) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "agent_cli", "run", "--yes", "--json"]
            + ["--base-url", server.url, "write the out files"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"the run in {tree} failed:\n{proc.stdout[-2000:]}\n{proc.stderr}")
    return model.per_call_s(ANSWERED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--before", default=BEFORE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agent-bench-") as tmp:
        old = Path(tmp) / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(old), args.before],
            cwd=ROOT,
            check=True,
        )
        try:
            before: list[list[float]] = []
            after: list[list[float]] = []
            for _ in range(args.runs):
                before.append(one_run(old, args.calls, Path(tmp) / "work"))
                after.append(one_run(ROOT, args.calls, Path(tmp) / "work"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
    b = statistics.median(statistics.mean(r) for r in before)
    a = statistics.median(statistics.mean(r) for r in after)
    b_mid = statistics.median(statistics.median(r) for r in before)
    a_mid = statistics.median(statistics.median(r) for r in after)
    print(f"harness time per tool call, {args.calls} calls, {args.runs} runs (mean; median call)")
    print(f"  before ({args.before}): {b * 1000:8.2f} ms  ({b_mid * 1000:.2f} ms)")
    print(f"  after  (this tree): {a * 1000:8.2f} ms  ({a_mid * 1000:.2f} ms)")
    print(f"  after / before:     {a / b:8.2f}  ({a_mid / b_mid:.2f}; target <= 0.33)")


if __name__ == "__main__":
    main()
