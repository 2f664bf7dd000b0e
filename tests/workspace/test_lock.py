"""The run lock, held and taken over across real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_cli.core.errors import WorkspaceError
from agent_cli.workspace.lock import RunLock
from reliability.relkit import wait_for

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
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
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
    path.write_text(json.dumps({"pid": pid, "started": started or time.time()}))


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


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


def test_check_refuses_while_held_and_creates_nothing_when_free(holder_process, tmp_path):
    proc, path = holder_process
    with pytest.raises(WorkspaceError, match=f"pid {proc.pid}"):
        RunLock(path).check()
    free = tmp_path / "elsewhere" / "run.lock"
    RunLock(free).check()
    assert not free.parent.exists()


def test_the_lock_of_a_killed_holder_is_taken_over(holder_process):
    proc, path = holder_process
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert path.exists()  # the file stays behind; the kernel dropped the lock
    lock = RunLock(path)
    lock.acquire()
    assert json.loads(path.read_text())["pid"] == os.getpid()
    lock.release()


def test_a_lock_file_naming_a_dead_pid_is_free(tmp_path):
    path = tmp_path / "run.lock"
    _write_lock(path, _dead_pid())
    with RunLock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_lock_file_naming_a_live_process_that_holds_no_lock_is_free(tmp_path):
    # A pid reused by an unrelated process used to need /proc archaeology; the flock needs none.
    path = tmp_path / "run.lock"
    other = subprocess.Popen(["sleep", "30"])
    try:
        _write_lock(path, other.pid)
        with RunLock(path):
            assert json.loads(path.read_text())["pid"] == os.getpid()
    finally:
        other.kill()
        other.wait()


def test_a_zombie_holder_holds_nothing(holder_process):
    proc, path = holder_process
    os.kill(proc.pid, signal.SIGKILL)
    wait_for(lambda: _state(proc.pid) == "Z", what="the killed holder to become a zombie")
    try:
        with RunLock(path):
            assert json.loads(path.read_text())["pid"] == os.getpid()
    finally:
        proc.wait()


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


def test_a_child_process_does_not_inherit_the_lock(tmp_path):
    path = tmp_path / "run.lock"
    lock = RunLock(path)
    lock.acquire()
    child = subprocess.Popen(["sleep", "30"], close_fds=False)
    try:
        lock.release()
        with RunLock(path):
            pass
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_lock_path_that_is_a_link_or_a_fifo_is_refused_and_nothing_written(tmp_path, kind):
    # a link would have the holder's JSON written over the file it names (a repository can
    # commit .agent/run.lock as one), and opening a FIFO would wait for ever
    from agent_cli.core.errors import StorageError
    from agent_cli.workspace.lock import live_holder

    mine = tmp_path / "precious.txt"
    mine.write_text("mine\n")
    path = tmp_path / "run.lock"
    if kind == "symlink":
        path.symlink_to(mine)
    else:
        os.mkfifo(path)
    for take in (RunLock(path).acquire, RunLock(path).check):
        with pytest.raises(StorageError, match="cannot take the run lock"):
            take()
    assert live_holder(path) is None and RunLock(path).holder() is None
    assert mine.read_text() == "mine\n"


def test_a_release_cut_short_by_ctrl_c_after_the_close_does_not_close_it_again(tmp_path):
    """Ctrl-C taken right after the lock's descriptor was closed (a second Ctrl-C while the
    run stops): the lock is given up, and releasing it again closes no descriptor, not one
    that another file has been handed since (here the next file opened)."""
    lock = RunLock(tmp_path / "run.lock")
    lock.acquire()

    def ctrl_c_after_close(frame, event, arg) -> None:
        if event == "c_return" and arg is os.close:
            sys.setprofile(None)
            raise KeyboardInterrupt

    sys.setprofile(ctrl_c_after_close)
    try:
        with pytest.raises(KeyboardInterrupt):
            lock.release()
    finally:
        sys.setprofile(None)
    other = os.open(tmp_path / "other", os.O_CREAT | os.O_RDWR)  # likely the freed number
    try:
        lock.release()  # the run's own cleanup releases it once more
        os.fstat(other)  # still open
    finally:
        os.close(other)
    assert not (tmp_path / "run.lock").exists() and not lock.held


@pytest.mark.parametrize("where", ["parent", "grandparent"])
def test_a_file_on_the_lock_path_is_named_with_the_right_fix(tmp_path, where):
    from agent_cli.core.errors import StorageError

    blocking = tmp_path / "state" / "checkouts"
    blocking.parent.mkdir()
    if where == "grandparent":
        blocking = tmp_path / "state"
        blocking.rmdir()
    blocking.write_text("another tool's file\n")
    lock = RunLock(tmp_path / "state" / "checkouts" / "abc.lock")
    for take in (lock.check, lock.acquire):
        with pytest.raises(StorageError) as refused:
            take()
        said = refused.value.one_line()
        assert f"{blocking} is a file, not a directory" in said, said
        assert f"move {blocking} aside" in said and "remove it" not in said
    assert blocking.read_text() == "another tool's file\n"
