"""The process tree below the agent, read both ways: following `children` files and scanning
every process's `stat`. Real processes: a shell with children, a grandchild, a daemon that
left the session (re-parented to this process, a subreaper) and a zombie waiting to be reaped."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from agent_cli.workspace.shell import proctree, reaper

needs_children = pytest.mark.skipif(
    not proctree.children_listed(), reason="this kernel lists no task's children"
)


def _wait_for(path: Path) -> int:
    deadline = time.monotonic() + 10
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.01)
    return int(path.read_text())


@pytest.fixture
def tree(tmp_path):
    """A shell whose child runs a grandchild, a daemon re-parented to this process, and a
    finished child of this process not yet reaped; every one killed and reaped at the end."""
    before = reaper.adopt_orphans()
    shell = subprocess.Popen(
        ["sh", "-c", f"sh -c 'sleep 30 & echo $! > {tmp_path}/grand; wait' & wait"]
    )
    daemon = subprocess.Popen(
        ["setsid", "-f", "sh", "-c", f"echo $$ > {tmp_path}/daemon; exec sleep 30"]
    )
    daemon.wait()  # setsid -f forks and exits: the daemon is an orphan, now this process's
    zombie = subprocess.Popen(["true"])
    while proctree.state_of(zombie.pid) != "Z":
        time.sleep(0.01)
    pids = {
        "shell": shell.pid,
        "grandchild": _wait_for(tmp_path / "grand"),
        "daemon": _wait_for(tmp_path / "daemon"),
        "zombie": zombie.pid,
    }
    yield before, pids
    reaper.kill_leftovers(before)
    shell.wait()
    zombie.wait()


@needs_children
def test_both_ways_find_the_same_processes_with_their_parents_and_states(tree):
    before, pids = tree
    me = os.getpid()
    by_children = set(proctree.below_by_children(me, before))
    by_scan = set(proctree.below_by_scan(me, before))
    assert by_children == by_scan
    found = {pid: (ppid, state) for pid, ppid, state in by_children}
    assert found[pids["zombie"]] == (me, "Z")
    assert found[pids["daemon"]][0] == me  # adopted: this process is a subreaper
    assert found[pids["grandchild"]][0] not in (me, pids["shell"])  # under the inner shell
    assert found[pids["shell"]][0] == me


@needs_children
def test_a_skipped_process_hides_everything_below_it_both_ways(tree):
    before, pids = tree
    skip = before | {pids["shell"]}
    for way in (proctree.below_by_children, proctree.below_by_scan):
        found = {pid for pid, _, _ in way(os.getpid(), skip)}
        assert pids["grandchild"] not in found and pids["shell"] not in found, way.__name__
        assert {pids["daemon"], pids["zombie"]} <= found, way.__name__


def test_descendants_leave_out_zombies_and_the_reaper_kills_the_rest(tree):
    before, pids = tree
    live = reaper.descendants(os.getpid(), before)
    assert {pids["shell"], pids["grandchild"], pids["daemon"]} <= live
    assert pids["zombie"] not in live
    assert reaper.kill_leftovers(before) >= 3
    assert reaper.descendants(os.getpid(), before) == set()


@needs_children
def test_children_of_every_thread_are_found(tmp_path):
    """A child started by another thread is listed under that thread's task, not the leader's."""
    before = reaper.adopt_orphans()
    started: list[subprocess.Popen[bytes]] = []
    release = threading.Event()

    def start_and_hold() -> None:
        started.append(subprocess.Popen(["sleep", "30"]))
        release.wait()  # the thread stays alive, so the child stays its own

    thread = threading.Thread(target=start_and_hold)
    thread.start()
    try:
        while not started:
            time.sleep(0.01)
        found = {pid for pid, _, _ in proctree.below_by_children(os.getpid(), before)}
        assert started[0].pid in found
    finally:
        started[0].kill()
        started[0].wait()
        release.set()
        thread.join()


def test_an_adopted_orphan_that_ended_is_reaped_when_nothing_is_left_to_kill():
    before = reaper.adopt_orphans()
    # the inner shell leaves its session and ends at once: re-parented to this process
    # (a subreaper), it waits as a zombie until reaped
    out = subprocess.run(
        ["sh", "-c", "setsid -f sh -c 'echo $$'"], capture_output=True, text=True, check=True
    )
    orphan = int(out.stdout.split()[0])
    deadline = time.monotonic() + 30
    while proctree.state_of(orphan) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proctree.state_of(orphan) == "Z"
    assert reaper.kill_leftovers(before) == 0
    assert proctree.state_of(orphan) is None
