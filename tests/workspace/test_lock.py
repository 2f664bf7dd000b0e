"""The run lock, held and taken over across real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agent_cli.errors import WorkspaceError
from agent_cli.workspace.lock import RunLock

HOLDER = """
import sys, time
from agent_cli.workspace.lock import RunLock
lock = RunLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder_process(tmp_path):
    path = tmp_path / "state" / "run.lock"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    yield proc, path
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _write_lock(path, pid, started=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "started": started or time.time(), "token": "other"}))


def test_acquire_writes_pid_and_start_time_and_release_removes_it(tmp_path):
    path = tmp_path / "run.lock"
    with RunLock(path) as lock:
        assert lock.held
        data = json.loads(path.read_text())
        assert data["pid"] == os.getpid()
        assert abs(data["started"] - time.time()) < 5
    assert not path.exists()
    assert not lock.held


def test_a_live_holder_in_another_process_blocks_a_second_run(holder_process):
    proc, path = holder_process
    with pytest.raises(WorkspaceError) as err:
        RunLock(path).acquire()
    assert f"another agent run (pid {proc.pid}) is running" in err.value.message
    assert f"kill {proc.pid}" in err.value.hint
    assert json.loads(path.read_text())["pid"] == proc.pid


def test_the_lock_of_a_killed_holder_is_taken_over(holder_process):
    proc, path = holder_process
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    lock = RunLock(path)
    lock.acquire()
    assert json.loads(path.read_text())["pid"] == os.getpid()
    lock.release()


def test_a_stale_lock_file_with_a_dead_pid_is_taken_over(tmp_path):
    path = tmp_path / "run.lock"
    _write_lock(path, _dead_pid())
    with RunLock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_zombie_holder_counts_as_dead(tmp_path):
    path = tmp_path / "run.lock"
    zombie = subprocess.Popen(["sleep", "30"])
    os.kill(zombie.pid, signal.SIGKILL)
    time.sleep(0.2)  # not reaped yet: the pid still exists, as a zombie
    try:
        _write_lock(path, zombie.pid)
        with RunLock(path):
            assert json.loads(path.read_text())["pid"] == os.getpid()
    finally:
        zombie.wait()


def test_a_reused_pid_that_started_after_the_lock_counts_as_dead(tmp_path):
    path = tmp_path / "run.lock"
    newer = subprocess.Popen(["sleep", "30"])
    try:
        _write_lock(path, newer.pid, started=time.time() - 3600)
        with RunLock(path):
            assert json.loads(path.read_text())["pid"] == os.getpid()
    finally:
        newer.kill()
        newer.wait()


def test_an_unreadable_lock_file_is_taken_over(tmp_path):
    path = tmp_path / "run.lock"
    path.write_text("not json")
    with RunLock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_second_lock_object_in_the_same_process_is_refused(tmp_path):
    path = tmp_path / "run.lock"
    with RunLock(path):
        with pytest.raises(WorkspaceError):
            RunLock(path).acquire()


def test_release_leaves_a_lock_that_another_run_took_over(tmp_path):
    path = tmp_path / "run.lock"
    lock = RunLock(path)
    lock.acquire()
    other = subprocess.Popen(["sleep", "30"])
    try:
        _write_lock(path, other.pid)
        lock.release()
        assert json.loads(path.read_text())["pid"] == other.pid
    finally:
        other.kill()
        other.wait()
