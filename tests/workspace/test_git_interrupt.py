"""Ctrl-C during a git command: the process can exit at once, no thread left waiting."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

from agent_cli.workspace.git.handle import RepoHandle
from workspace.test_git import make_repo


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def test_an_interrupted_git_command_leaves_no_thread_that_holds_up_the_exit(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    # a `git` first on PATH that hangs on one made-up command and is git for every other
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("git")
    (bin_dir / "git").write_text(
        f'#!/bin/sh\n[ "$1" = hang ] && exec sleep 30\nexec \'{real}\' "$@"\n'
    )
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    handle = RepoHandle(repo)
    before = set(threading.enumerate())
    previous = signal.signal(signal.SIGALRM, _interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            handle.run(["hang"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        handle.close()
    assert time.monotonic() - started < 20  # interrupted, not waited out
    # a non-daemon thread keeps the interpreter from exiting until it ends (GitPython's
    # watchdog for `kill_after_timeout` waits out the whole timeout)
    left = [t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()]
    assert left == []
