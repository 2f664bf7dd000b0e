"""Time from process start to the first model request of `agent run`, next to the floor.

The floor is `python -c "import openai, chromadb"` in the same interpreter: the two vendor
imports a run with long-term memory cannot avoid. `agent run --plan-only` runs against a
loopback FakeOpenAIServer that notes when the first chat request arrives; the time counts
from just before the process is spawned. Two repositories: a fresh one (no memory yet, so
no Chroma is needed before the request) and one whose long-term memory holds a fact
(recalled for the plan from the store's snapshot, memory/snapshot.py: numpy and the
embedder, no Chroma). Median of RUNS, interleaved. Target: <= 1.0x the floor for both.

A third row, not part of the target, times the same remembered repository with its
snapshot deleted before each run: what a run pays when the snapshot is missing (the first
run after a crash, or after an older version wrote the store), since Chroma must then open
before the plan.

    python bench/first_request.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from agent_cli.llm.fake_server import FakeOpenAIServer
from agent_cli.memory.longterm import snapshot

PLAN = {
    "tool": "submit_plan",
    "args": {
        "goal": "g",
        "success_criteria": "ok",
        "tasks": [
            {
                "goal": "create done.txt",
                "acceptance": "it exists",
                "acceptance_cmd": "test -f done.txt",
            }
        ],
    },
}


class FirstRequestClock:
    """A loopback server that records the wall time of its first chat request."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.seen = threading.Event()
        self.server = FakeOpenAIServer(self._reply).start()

    def _reply(self, body: dict) -> dict:
        if self.first is None:
            self.first = time.perf_counter()
            self.seen.set()
        return PLAN

    def reset(self) -> None:
        self.first = None
        self.seen.clear()


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(root: Path, name: str) -> Path:
    repo = root / name
    repo.mkdir()
    (repo / "README.md").write_text("# bench\n")
    git(repo, "init", "-q", "-b", "main")
    git(
        repo,
        "-c",
        "user.name=b",
        "-c",
        "user.email=b@b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    )
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "readme")
    return repo


def seed_memory(repo: Path) -> None:
    """Give the repository a long-term memory holding one verified fact."""
    from agent_cli.memory.embed import WordLlamaEmbedder
    from agent_cli.memory.longterm.chroma import LongTermMemory

    with LongTermMemory(repo / ".agent" / "chroma", WordLlamaEmbedder()) as memory:
        memory.add_fact(
            "In bench, `test -f done.txt` exits 0 once done.txt exists",
            "harness, run bench",
            trust=1.0,
        )


def time_run(clock: FirstRequestClock, repo: Path, env: dict[str, str]) -> float:
    clock.reset()
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_cli",
            "run",
            "create done.txt",
            "--plan-only",
            "--repo",
            str(repo),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0 or clock.first is None:
        raise SystemExit(f"agent run failed ({proc.returncode}): {proc.stderr.strip()}")
    return clock.first - start


def time_floor() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import openai, chromadb"], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    clock = FirstRequestClock()
    root = Path(tempfile.mkdtemp(prefix="bench-first-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_"))}
    env.update(
        AGENT_RC=os.devnull,  # no user settings
        NO_COLOR="1",
        AGENT_APPROVAL="auto",
        OPENAI_BASE_URL=clock.server.url,
        AGENT_MODEL="fake-model",
    )
    try:
        fresh, remembered = make_repo(root, "fresh"), make_repo(root, "remembered")
        seed_memory(remembered)
        times: dict[str, list[float]] = {
            "floor": [],
            "fresh": [],
            "remembered": [],
            "no snapshot": [],
        }
        time_floor()  # warm the file cache once for every contender
        time_run(clock, fresh, env)
        for _ in range(runs):
            times["floor"].append(time_floor())
            times["fresh"].append(time_run(clock, fresh, env))
            times["remembered"].append(time_run(clock, remembered, env))
            snapshot.invalidate(remembered / ".agent" / "chroma")
            times["no snapshot"].append(time_run(clock, remembered, env))
    finally:
        clock.server.stop()
        shutil.rmtree(root, ignore_errors=True)
    floor = statistics.median(times["floor"])
    print(f"median of {runs} runs, seconds from process start to the first request")
    print(f"{'':<40} {'median s':>9} {'x floor':>8}")
    floor_label = 'floor: python -c "import openai, chromadb"'
    print(f"{floor_label:<40} {floor:>9.3f} {1.0:>8.2f}")
    worst = 0.0
    for name, label in (
        ("fresh", "agent run, no memory yet"),
        ("remembered", "agent run, with long-term memory"),
    ):
        t = statistics.median(times[name])
        worst = max(worst, t / floor)
        print(f"{label:<40} {t:>9.3f} {t / floor:>8.2f}")
    t = statistics.median(times["no snapshot"])
    print(f"{'  (not in the target) snapshot missing':<40} {t:>9.3f} {t / floor:>8.2f}")
    print(f"target <= 1.00x the floor: {'met' if worst <= 1.0 else 'missed'} (worst {worst:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
