"""Processes a killed agent left running, found by their mark and stopped (shell/strays.py)."""

from __future__ import annotations

import os
import signal
import subprocess

from agent_cli.workspace.shell import strays
from reliability.relkit import pid_gone, wait_for


def _sleeper(mark: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["sleep", "30"], env={**os.environ, strays.MARK: mark}, start_new_session=True
    )


def test_only_processes_marked_by_an_agent_that_is_gone_are_stopped():
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid whose process has ended
    orphan = _sleeper(f"{gone.pid}:12345")
    reused = _sleeper(f"{os.getpid()}:1")  # this pid, but another start time: not this process
    live = _sleeper(strays.mark())  # this process's own command
    odd = _sleeper("not-a-mark")
    try:
        stopped = strays.stop_strays()
        assert live.pid not in stopped and odd.pid not in stopped
        for proc in (orphan, reused):  # stopped here, or by an agent another test started
            assert proc.wait(timeout=10) == -signal.SIGKILL
        assert live.poll() is None and odd.poll() is None
    finally:
        for proc in (orphan, reused, live, odd):
            proc.kill()
            proc.wait()
    wait_for(lambda: pid_gone(live.pid), what="the sleepers to end")


def test_a_commands_children_carry_the_mark_of_the_agent_that_runs_them(tmp_path):
    from agent_cli.workspace.shell.runner import run_command

    result = run_command("sh -c 'echo $AGENT_COMMAND_OF'", cwd=tmp_path, timeout_s=30)
    assert result.output.strip() == strays.mark()
