"""What the reaper pays around each command the harness runs (git's included): reading the
processes below the agent, by following `children` files against scanning every process's
`stat`, with other processes on the machine that are not the agent's.

`--others N` (default 300, a desktop's order) starts N sleeping processes in a session of
their own before the measure, so that they are the machine's, not the agent's. A command
costs the reaper two reads when nothing is left over (one to take its list of processes
to spare, one to find leftovers and adopted orphans that ended); the table gives one read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from agent_cli.workspace.shell import proctree, reaper

ROUNDS = 200


def start_others(n: int, folder: Path) -> list[int]:
    """N sleeping processes re-parented to init before this process is a subreaper."""
    pid_file = folder / "others"
    script = f"for i in $(seq {n}); do sleep 600 & echo $! >> {pid_file}; done"
    subprocess.run(["setsid", "-f", "sh", "-c", script], check=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pids = pid_file.read_text().split() if pid_file.exists() else []
        if len(pids) == n:
            return [int(p) for p in pids]
        time.sleep(0.05)
    raise SystemExit(f"only some of the {n} processes started")


def per_read_us(read: Callable[[int, set[int]], Iterable[object]]) -> float:
    """Median microseconds of one read of the tree below this process."""
    me, spared = os.getpid(), reaper.adopt_orphans()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        set(read(me, spared))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--others", type=int, default=300)
    args = parser.parse_args()
    if not proctree.children_listed():
        print("this kernel lists no task's children: the reaper scans every process")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        others = start_others(args.others, Path(folder)) if args.others else []
        try:
            total = sum(1 for name in os.listdir("/proc") if name.isdigit())
            scan = per_read_us(proctree.below_by_scan)
            children = per_read_us(proctree.below_by_children)
        finally:
            for pid in others:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
    print(f"{total} processes on the machine, {len(others)} of them started by this bench")
    print(f"{'way':<28} {'us per read':>12} {'x children':>11}")
    print(f"{'scan every stat (baseline)':<28} {scan:>12.0f} {scan / children:>11.1f}")
    print(f"{'follow children files':<28} {children:>12.0f} {1.0:>11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
