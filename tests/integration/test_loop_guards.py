"""Loop detection, success criteria in every request, and a run_done that tells the truth."""

from __future__ import annotations

import pytest
from runkit import (
    BAD_MEDIAN,
    GOAL,
    add_median,
    brief_text,
    events_of,
    finish,
    plan,
    state_of,
    task,
)

pytestmark = pytest.mark.slow


def agent_run(agent_in_process, srv, repo, *extra, env=None):
    return agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, *extra, cwd=repo, env=env
    )


def missing(order: str) -> dict:
    return {"tool": "run", "args": {"cmd": f"no-such-program-xyz {order}"}}


def memory_text(request: dict) -> str:
    return "".join(
        m["content"]
        for m in request["messages"]
        if (m.get("content") or "").startswith("WORKING MEMORY:")
    )


def test_a_failing_command_repeated_in_any_order_is_a_loop(
    agent_in_process, fake_server, demo_repo
):
    calls = [
        missing("--fast -v x"),
        missing("-v --fast x"),
        missing("x --fast -v"),
        missing("--fast x -v"),
        missing("-v x --fast"),
    ]
    srv = fake_server([plan(task())] + calls + [add_median(), finish()])
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loops = [e for e in events_of(proc.stdout) if e["event"] == "loop_detected"]
    assert [(e["repeats"], e["stopped"]) for e in loops] == [(3, False), (4, False), (5, True)]
    # the second call's result is the first's but for the command line it echoes: pointed to
    second_result = srv.chat_requests[3]["messages"][-2]["content"]
    assert second_result.startswith("(in WORKING MEMORY: [tool_output m")
    assert memory_text(srv.chat_requests[3]).count("[exit 127]") == 1
    third_result = srv.chat_requests[4]["messages"][-2]["content"]
    assert "same run call 3 times in a row" in third_result and "another approach" in third_result
    assert "not found" not in third_result  # the repeated result itself is not shown again
    assert memory_text(srv.chat_requests[4]).count("[exit 127]") == 1  # one copy kept
    verdict = [e for e in events_of(proc.stdout) if e["event"] == "verify"][0]
    assert verdict["reason"] == "stuck repeating run" and not verdict["passed"]


def test_different_results_are_not_a_loop(agent_in_process, fake_server, demo_repo):
    read = {"tool": "read_file", "args": {"path": "calc/stats.py"}}
    srv = fake_server([plan(task()), read, read, add_median(), read, finish()])
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0
    assert not [e for e in events_of(proc.stdout) if e["event"] == "loop_detected"]
    # the same read twice in a row: one copy in working memory, the second result points to it
    again = srv.chat_requests[3]["messages"][-2]["content"]
    assert again == "(in WORKING MEMORY: [file m1], the same result 2 times now)"
    assert memory_text(srv.chat_requests[3]).count("def mean") == 1


def test_success_criteria_reach_every_task_request_and_the_model_verifier(
    agent_in_process, fake_server, demo_repo
):
    judged = {
        "goal": "Explain median in NOTES.txt",
        "acceptance": "NOTES.txt explains it",
        "acceptance_cmd": None,
    }
    verdict = {"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "explained"}}
    srv = fake_server(
        [
            plan(task(), judged),
            add_median(),
            finish(),
            {"tool": "write_file", "args": {"path": "NOTES.txt", "content": "m\n"}},
            finish(),
            verdict,
        ]
    )
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    criteria = "Success criteria of the whole plan: the tests pass"
    executing = [r for r in srv.chat_requests if len(r.get("tools", [])) > 2]
    assert executing and all(criteria in brief_text(r) for r in executing)
    (judge,) = [
        r
        for r in srv.chat_requests
        if r.get("tools", [{}])[0].get("function", {}).get("name") == "submit_verdict"
    ]
    assert criteria in judge["messages"][-1]["content"]


def test_json_ends_with_run_done_when_planning_fails(agent_in_process, fake_server, demo_repo):
    bad = {"tool_calls": [{"name": "submit_plan", "arguments": "{not json"}]}
    srv = fake_server([bad, bad])
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 1 and "valid plan" in proc.stderr
    done = events_of(proc.stdout)[-1]
    assert done["event"] == "run_done" and done["status"] == "failed" and done["exit_code"] == 1
    assert "valid plan" in done["message"]


def test_run_done_never_says_running_after_the_run(agent_in_process, fake_server, demo_repo):
    srv = fake_server([plan(task())] + [{"tool": "read_file", "args": {"path": "README.md"}}] * 5)
    proc = agent_run(agent_in_process, srv, demo_repo, "--max-steps", "2")
    assert proc.returncode == 4
    done = events_of(proc.stdout)[-1]
    assert done["tasks"][0]["status"] == "unfinished"
    assert state_of(demo_repo)["agent_state"]["plan"][0]["status"] == "running"  # resumable


def test_escalation_speaks_of_uncommitted_changes_only_when_there_are_some(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task()), finish("nothing"), finish("still nothing")])
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 3
    escalated = [e for e in events_of(proc.stdout) if e["event"] == "escalated"][0]
    assert "uncommitted" not in escalated["next_steps"] and escalated["diff_stat"] == ""
    assert "changed no files" in escalated["next_steps"]
    srv2 = fake_server([add_median(BAD_MEDIAN), finish(), finish()])
    proc = agent_in_process(
        "run", "--resume", "--yes", "--json", "--base-url", srv2.url, cwd=demo_repo
    )
    escalated = [e for e in events_of(proc.stdout) if e["event"] == "escalated"][0]
    assert "left uncommitted" in escalated["next_steps"]
    assert escalated["diff_stat"].startswith("calc/stats.py | +") and escalated["attempts"] == 2
