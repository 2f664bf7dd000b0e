"""kill -9 of a real agent process in its second attempt, then --resume: the count is right.

The first attempt failed and was saved as spent; the second was counted when it started and
cut short by the kill, so the resumed run makes it again as attempt 2, never a third.
"""

from __future__ import annotations

import os
import signal

import pytest

from reliability.relkit import (
    GOAL,
    call,
    events,
    finish,
    make_done,
    no_facts,
    plan,
    read_state,
    repo_with,
    spawn_agent,
    task,
    wait_for,
)

__all__ = ["spawn_agent"]

pytestmark = pytest.mark.slow


def test_sigkill_in_the_second_attempt_then_resume_counts_the_first(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [
            plan(task()),
            make_done("other.txt"),
            finish(),
            {**call("read_file", path="README.md"), "delay": 60},
        ]
    )
    agent = spawn_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)

    def second_attempt_waiting() -> bool:
        state = read_state(repo)
        saved = state["agent_state"]["plan"][0] if state else {}
        return saved.get("attempts") == 2 and len(srv.chat_requests) == 4

    wait_for(second_attempt_waiting, what="attempt 2 started and waiting for the model")
    os.kill(agent.pid, signal.SIGKILL)
    assert agent.wait() == -signal.SIGKILL
    saved = read_state(repo)["agent_state"]["plan"][0]
    assert (saved["status"], saved["attempts"]) == ("running", 2)

    rest = fake_server([make_done(), finish(), no_facts()])
    proc = agent_in_process("run", "--resume", "--yes", "--json", "--base-url", rest.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    started = [e["attempt"] for e in events(proc.stdout) if e["event"] == "task_started"]
    assert started == [2]
    assert read_state(repo)["agent_state"]["plan"][0]["attempts"] == 2
