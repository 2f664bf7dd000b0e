"""The run record: state.json written as before, and a run saved by agent 0.1.0 resumes.

`tests/fixtures/state-0.1.0.json` is the state.json of a run that failed after one tool
call, written by version 0.1.0 (with the budget fields AgentState no longer has, and its
`spent_usd` saved as 0.0 although money was spent).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from runkit import events_of

from conftest import git, make_repo

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "state-0.1.0.json"
OLD = json.loads(FIXTURE.read_text())


@pytest.mark.slow
def test_a_run_saved_by_version_0_1_0_resumes_and_keeps_its_spending(
    run_agent, fake_server, tmp_path
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
    proc = run_agent(
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
