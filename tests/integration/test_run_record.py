"""The run record: state.json written as before, and a run saved by agent 0.1.0 resumes.

`tests/fixtures/state-0.1.0.json` is the state.json of a run that failed after one tool
call, written by version 0.1.0 (with the budget fields AgentState no longer has, and its
`spent_usd` saved as 0.0 although money was spent).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from runkit import events_of

from conftest import git, make_repo
from reliability.relkit import (
    GOAL,
    call,
    finish,
    make_done,
    no_facts,
    plan,
    read_state,
    spawn_agent,
    state_files,
    task,
    wait_for,
)

__all__ = ["spawn_agent"]

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "state-0.1.0.json"
OLD = json.loads(FIXTURE.read_text())


@pytest.mark.slow
def test_a_run_saved_by_version_0_1_0_resumes_and_keeps_its_spending(
    agent_in_process, fake_server, tmp_path
):
    repo = make_repo(tmp_path / "repo")
    run_dir = repo / ".agent" / "runs" / OLD["run_id"]
    run_dir.mkdir(parents=True)
    shutil.copy(FIXTURE, run_dir / "state.json")
    git(repo, "branch", OLD["branch"])
    srv = fake_server(
        [
            {"tool": "write_file", "args": {"path": "done.txt", "content": "d\n"}},
            {"tool": "finish", "args": {"summary": "made done.txt"}},
        ]
    )
    proc = agent_in_process(
        "run",
        "--resume",
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        cwd=repo,
        env={"AGENT_PRICE_INPUT_PER_MTOK": "0.15"},
    )  # a loopback server bills 0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert events_of(proc.stdout)[0]["resumed"] is True
    new = json.loads((run_dir / "state.json").read_text())
    assert new["status"] == "verified" and new["steps"] == OLD["steps"] + 2
    assert list(new)[: len(OLD)] == list(OLD)  # the same keys, in the same order
    assert new["usage"]["cost_usd"] > OLD["usage"]["cost_usd"] > 0  # the earlier spending counts
    assert new["usage"]["prompt_tokens"] > OLD["usage"]["prompt_tokens"]
    assert "spent_usd" not in new["agent_state"] and "budget_steps" not in new["agent_state"]
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.slow
def test_a_run_killed_between_tool_calls_resumes_from_its_journal(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    repo = make_repo(tmp_path / "repo")
    srv = fake_server(
        [
            plan(task()),
            call("note", text="the README is one line long"),
            call("read_file", path="README.md"),
            {**make_done(), "delay": 60},
        ]
    )
    agent = spawn_agent("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    wait_for(lambda: len(srv.chat_requests) == 4, what="two tool calls made")
    journal = state_files(repo)[-1].parent / "journal.jsonl"
    wait_for(lambda: journal.exists() and len(journal.read_text().splitlines()) == 2)
    os.kill(agent.pid, signal.SIGKILL)
    assert agent.wait() == -signal.SIGKILL
    saved = read_state(repo)
    assert saved is not None and saved["steps"] == 0  # written when the attempt started
    assert [json.loads(line)["step"] for line in journal.read_text().splitlines()] == [1, 2]

    rest = fake_server([make_done(), finish(), no_facts()])
    proc = agent_in_process("run", "--resume", "--yes", "--json", "--base-url", rest.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = json.dumps(rest.chat_requests[0]["messages"])
    assert "the README is one line long" in first and "# scratch" in first  # memory kept
    new = read_state(repo)
    assert new is not None and new["status"] == "verified" and new["steps"] == 4
    assert new["usage"]["prompt_tokens"] > 0 and journal.read_text() == ""
