"""`agent batch` at --jobs 1, 2 and 4: wall time and memory of 8 scripted goals, in one run.

Each goal is a one-task run (plan, write a file, finish, the end-of-run facts request)
against one loopback FakeOpenAIServer in this process that answers each run by its goal
(`agent_cli.llm.fake.routes.ByGoal`) after a reply delay drawn from 1-2 s, as a hosted model
takes. Every --jobs setting gets a fresh repository and the same 8 goals; the batch is a
real `python -m agent_cli batch FILE --jobs N --yes --json` process, and each of its runs a
real `agent run --worktree --json` process. Printed: the wall time of each setting, its
ratio to --jobs 1 (target >= 1.7x at 4 jobs on 2 cores: the runs mostly wait on the model),
the peak resident memory of each run's process (median and max, from batch.json, which
takes it from wait4), and of the batch driver itself (batch.json's driver_peak_rss_mb).
The machine's load shows in every figure alike.

    python bench/batch.py [--goals 8] [--jobs 1,2,4] [--delay 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_cli.llm.fake.routes import ByGoal  # noqa: E402
from agent_cli.llm.fake_server import FakeOpenAIServer  # noqa: E402


def goal(n: int) -> str:
    return f"Create file{n}.txt"


def script(n: int) -> list[dict[str, object]]:
    """The replies of goal `n`'s run: its plan, the file, finish, no facts."""
    name = f"file{n}.txt"
    check = {"goal": goal(n), "acceptance": "the file exists", "acceptance_cmd": f"test -f {name}"}
    return [
        {
            "tool": "submit_plan",
            "args": {"goal": goal(n), "tasks": [check], "success_criteria": "the file exists"},
        },
        {"tool": "write_file", "args": {"path": name, "content": f"{name}\n"}},
        {"tool": "finish", "args": {"summary": f"created {name}"}},
        {"tool": "submit_facts", "args": {"facts": []}},
    ]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# bench\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "Bench")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def env(home: Path) -> dict[str, str]:
    """No user settings, no real key; the re-plan check and the closing summary off."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_"))}
    out.update(
        AGENT_RC=os.devnull,  # no user settings
        HOME=str(home),
        NO_COLOR="1",
        AGENT_REPLAN="off",
        AGENT_FINAL_SUMMARY="false",
        PYTHONPATH=str(ROOT),
    )
    return out


def one_batch(work: Path, goals: int, jobs: int, delay: tuple[float, float]) -> dict[str, object]:
    """Run the batch at `jobs`; its wall time, exit code, runs' and driver's peak memory."""
    repo = make_repo(work / f"repo-{jobs}")
    file = work / f"goals-{jobs}.toml"
    file.write_text("".join(f'[[goals]]\ngoal = "{goal(n)}"\n\n' for n in range(goals)))
    router = ByGoal({goal(n): script(n) for n in range(goals)}, delay=delay, seed=jobs)
    with FakeOpenAIServer(router) as srv:
        argv = [sys.executable, "-m", "agent_cli", "batch", str(file), "--jobs", str(jobs)]
        argv += ["--yes", "--json", "--base-url", srv.url]
        began = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=repo, env=env(work / "home"), stdout=subprocess.PIPE, text=True
        )
        out, _ = proc.communicate()
        wall = time.perf_counter() - began
        served = srv.max_in_flight
    last = json.loads(out.strip().splitlines()[-1])
    record = json.loads(Path(last["batch_json"]).read_text())
    rss = [r["peak_rss_mb"] for r in record["runs"]]
    return {
        "jobs": jobs,
        "wall": wall,
        "exit": last["exit_code"],
        "verified": sum(r["status"] == "verified" for r in record["runs"]),
        "rss_median": statistics.median(rss),
        "rss_max": max(rss),
        "driver_rss": record["driver_peak_rss_mb"],
        "in_flight": served,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=8)
    parser.add_argument("--jobs", default="1,2,4", help="comma-separated --jobs settings")
    parser.add_argument("--delay", default="1,2", help="reply delay range in seconds: LOW,HIGH")
    args = parser.parse_args()
    low, high = (float(x) for x in args.delay.split(","))
    settings = [int(j) for j in args.jobs.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        for jobs in settings:
            results.append(one_batch(Path(tmp), args.goals, jobs, (low, high)))
            r = results[-1]
            print(
                f"--jobs {jobs}: {r['wall']:.1f} s, exit {r['exit']}, "
                f"{r['verified']}/{args.goals} verified",
                flush=True,
            )
    base = results[0]["wall"]
    print(f"\n{args.goals} goals, reply delay {low:g}-{high:g} s, {os.cpu_count()} cores")
    print(
        f"{'jobs':>4} {'wall s':>8} {'speed-up':>9} {'in flight':>9} "
        f"{'run RSS MiB median/max':>23} {'driver RSS MiB':>15}"
    )
    for r in results:
        ratio = base / r["wall"]  # type: ignore[operator]
        print(
            f"{r['jobs']:>4} {r['wall']:>8.1f} {ratio:>8.2f}x {r['in_flight']:>9} "
            f"{r['rss_median']:>14.0f} / {r['rss_max']:<6.0f} {r['driver_rss']:>15.0f}"
        )
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
