"""The real `agent run` process, with the key in every kind of text (`redactkit`): it appears in
no request the server received, not on stdout (events or the text log), not on stderr, not in
any file under the state directory, not in the recording."""

from __future__ import annotations

import json

from redactkit import MASK, env, files_holding, holding, repo_for, request_bodies, script

GOAL = "Create done.txt and sub/x.txt"
ON = {"AGENT_REPLAN": "after_task", "AGENT_FINAL_SUMMARY": "true"}


def test_with_json_events_and_a_recording_the_key_leaves_by_no_way(
    run_agent, fake_server, tmp_path
):
    repo = repo_for(tmp_path)
    srv = fake_server(script())
    record = tmp_path / "exchanges.jsonl"
    done = run_agent(
        "run",
        GOAL,
        "--json",
        "--yes",
        "--base-url",
        srv.url,
        "--record",
        str(record),
        cwd=repo,
        env={**env(tmp_path), **ON},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = {e["event"] for e in events}
    assert {"plan", "plan_revised", "task_started", "verify", "final_summary", "run_done"} <= kinds
    assert [holding(b) for b in request_bodies(srv) if holding(b)] == []
    assert holding(done.stdout) == [] and holding(done.stderr) == []
    assert files_holding(repo / ".agent") == []
    assert holding(record.read_text()) == [] and MASK in record.read_text()
    for line in record.read_text().splitlines():
        json.loads(line)  # a recording still replays: every line is JSON


def test_in_the_text_log_the_key_is_masked_wherever_it_is_shown(run_agent, fake_server, tmp_path):
    repo = repo_for(tmp_path)
    srv = fake_server(script())
    done = run_agent(
        "run",
        GOAL,
        "--yes",
        "--verbose",
        "--base-url",
        srv.url,
        cwd=repo,
        env={**env(tmp_path), **ON},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert holding(done.stdout) == [] and holding(done.stderr) == []
    for shown in (
        f"Create done.txt {MASK}",  # the plan and the report
        f"plan revised after a verified task: the second task needs its folder named {MASK}",
        f"K={MASK}",  # the failing check's output
        f"Both files are made. {MASK} {MASK}",  # the closing summary
    ):
        assert shown in done.stdout, shown
    assert [holding(b) for b in request_bodies(srv) if holding(b)] == []
    assert files_holding(repo / ".agent") == []
