"""Start-up time of `agent --help` and `agent --version` next to `python -c pass`.

Each command runs as a whole process, 10 times; the median wall time is printed with
its ratio to the bare interpreter. Target: `agent --help` <= 0.3 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 10
TARGET_S = 0.3


def median_wall(argv: list[str]) -> float:
    """Median wall-clock seconds of `argv` over RUNS runs (after one warm-up)."""
    subprocess.run(argv, capture_output=True, check=True)
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    base = median_wall([sys.executable, "-c", "pass"])
    rows = [("python -c pass", base)]
    for args in (["--help"], ["--version"]):
        rows.append((f"agent {args[0]}", median_wall([sys.executable, "-m", "agent_cli", *args])))
    print(f"{'command':<18} {'median s':>9} {'x python':>9}")
    for name, t in rows:
        print(f"{name:<18} {t:>9.3f} {t / base:>9.1f}")
    help_s = rows[1][1]
    verdict = "meets" if help_s <= TARGET_S else "MISSES"
    print(f"agent --help {verdict} the {TARGET_S:.1f} s target ({help_s:.3f} s)")
    return 0 if help_s <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
