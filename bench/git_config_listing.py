"""What each harness git call pays to empty the repository's config: the listing reused while
the bytes that decide it are unchanged (configfiles.py), against a listing made every time.

The baseline is the same call with `GIT_DIR` in its environment, which the fingerprint does
not stand for, so `git config --list` runs each time, as it did before listings were reused.
Both rows are the median of ROUNDS calls in a real repository holding a few config keys;
`safe_env` is the environment alone, `run_git` adds the git command itself (`rev-parse HEAD`).
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent_cli.workspace.git.safe import run_git, safe_env

ROUNDS = 200


def make_repo(path: Path) -> Path:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)

    path.mkdir()
    git("init", "-q", "-b", "main")
    git("config", "user.name", "Bench")
    git("config", "user.email", "bench@example.com")
    git("config", "filter.lfs.clean", "git-lfs clean -- %f")
    git("config", "diff.tool", "vimdiff")
    (path / "a.txt").write_text("a\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    return path


def median_us(call: Callable[[], object]) -> float:
    call()  # the first call lists in both ways
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        repo = make_repo(Path(folder) / "repo")
        placed = {"GIT_DIR": str(repo / ".git")}
        rows = [
            ("safe_env", lambda: safe_env(repo), lambda: safe_env(repo, extra_env=placed)),
            (
                "run_git rev-parse HEAD",
                lambda: run_git(["rev-parse", "HEAD"], repo),
                lambda: run_git(["rev-parse", "HEAD"], repo, extra_env=placed),
            ),
        ]
        print(f"{'call':<24} {'listed each time us':>20} {'reused us':>10} {'faster':>7}")
        for name, reused, listed in rows:
            base, now = median_us(listed), median_us(reused)
            print(f"{name:<24} {base:>20.0f} {now:>10.0f} {base / now:>6.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
