"""A misbehaving model endpoint, served by the loopback server: HTTP errors, a reply slower
than the request timeout, garbage bodies, replies without choices or tool calls, broken
tool calls, and a run of malformed replies long enough to stop the run."""

from __future__ import annotations

import json

import pytest

from reliability.relkit import (
    GOAL,
    call,
    calls,
    commit_count,
    events,
    finish,
    make_done,
    no_facts,
    plan,
    read_state,
    repo_with,
    task,
    task_statuses,
    tool_results,
)

# A run starts its checks (`python -m pytest`) and git as real processes.
pytestmark = pytest.mark.slow

ERROR_BODY = json.dumps({"error": {"message": "upstream trouble"}})


def _agent_run(agent_in_process, srv, repo, *extra, env=None):
    return agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, *extra, cwd=repo, env=env
    )


def _last_user(request: dict) -> str:
    return request["messages"][-1]["content"]


def test_http_errors_and_a_timeout_are_retried_and_bad_replies_go_back_as_tool_errors(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [
            {"status": 429, "body": ERROR_BODY},
            {"status": 500, "body": ERROR_BODY},
            {"status": 503, "body": ERROR_BODY},
            {**plan(task()), "delay": 2.0},  # > request timeout
            plan(task()),
            {"raw": '{"choices": "a string"}'},  # JSON, but no completion (a page: the endpoint's)
            {"no_choices": True},
            {"content": "I believe the task is complete."},
            calls(
                ("read_file", '{"path": "README.md"'),  # cut-off JSON
                ("rm_rf", {"path": "/"}),  # a tool that does not exist
                ("read_file", {}),  # the required argument missing
                ("write_file", "[1, 2]"),
            ),  # arguments that are not an object
            make_done(),
            finish(),
            no_facts(),
        ]
    )
    proc = _agent_run(agent_in_process, srv, repo, env={"AGENT_REQUEST_TIMEOUT_S": "0.5"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notices = [line for line in proc.stderr.splitlines() if "retry" in line]  # like errors
    assert len(notices) == 4, proc.stderr
    assert any("429" in n for n in notices) and any("timed out" in n.lower() for n in notices)
    assert not [e for e in events(proc.stdout) if "retry" in e.get("text", "")]

    reqs = srv.chat_requests
    assert len(reqs) == 12  # with the end-of-run submit_facts request
    assert "NOTE: your last reply was not readable" in _last_user(reqs[6])
    assert "NOTE: your last reply had no choices" in _last_user(reqs[7])
    assert "NOTE: your last reply had no tool call" in _last_user(reqs[8])
    bad_json, unknown, missing, not_object = tool_results(reqs[9])
    assert "not valid JSON" in bad_json
    assert "unknown tool 'rm_rf'" in unknown and "read_file" in unknown
    assert "missing required argument(s): path" in missing
    assert "must be a JSON object" in not_object
    assert read_state(repo)["status"] == "verified" and commit_count(repo) == 2


def test_a_plan_request_the_server_keeps_refusing_is_not_said_to_be_resumable(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    failing = fake_server([{"status": 500, "body": ERROR_BODY}] * 3)
    proc = _agent_run(agent_in_process, failing, repo, env={"AGENT_MAX_RETRIES": "2"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    done = events(proc.stdout)[-1]
    assert done["event"] == "run_done" and "kept failing with 500" in done["message"]
    assert "run the same command again" in done["message"]
    assert "--resume" not in done["message"] and "--resume" not in proc.stderr
    assert "already begun" not in done["message"]  # said to a run that has not begun


@pytest.mark.parametrize(
    "status, hint",
    [
        (503, "the server is in trouble; try again later (run the same command again)"),
        (429, "wait a minute and try again (run the same command again)"),
    ],
)
def test_a_plan_request_that_keeps_failing_says_the_way_on_in_plain_words(
    agent_in_process, fake_server, tmp_path, status, hint
):
    repo = repo_with(tmp_path / "repo")
    failing = fake_server([{"status": status, "body": ERROR_BODY}] * 3)
    proc = _agent_run(agent_in_process, failing, repo, env={"AGENT_MAX_RETRIES": "2"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert events(proc.stdout)[-1]["message"].endswith(f"({hint})"), proc.stdout


def test_retries_run_out_mid_task_then_resume_finishes_without_planning_again(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    second = task("Create done2.txt", "test -f done2.txt")
    failing = fake_server(
        [plan(task(), second), make_done(), finish()] + [{"status": 500, "body": ERROR_BODY}] * 3
    )
    proc = _agent_run(agent_in_process, failing, repo, env={"AGENT_MAX_RETRIES": "2"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    done = events(proc.stdout)[-1]
    assert done["event"] == "run_done" and "kept failing with 500" in done["message"]
    assert "agent run --resume" in done["message"]
    assert read_state(repo)["status"] == "failed"
    assert task_statuses(repo) == ["verified", "running"] and commit_count(repo) == 2

    rest = fake_server([call("write_file", path="done2.txt", content="2\n"), finish(), no_facts()])
    proc = agent_in_process("run", "--resume", "--yes", "--json", "--base-url", rest.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all("submit_plan" not in json.dumps(r.get("tools", [])) for r in rest.chat_requests)
    assert len(rest.chat_requests) == 3  # task 1 was not redone; then the facts at the end
    assert task_statuses(repo) == ["verified", "verified"] and commit_count(repo) == 3


def test_ten_malformed_replies_in_a_row_stop_the_run_with_its_state_saved(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    garbage = [
        {"raw": '{"choices": [{"message": {"content": {"a": 1}}}]}'},
        {"no_choices": True},
        {"content": "just text"},
        calls(("nope", {})),
        calls(("read_file", "{broken")),
        calls(("read_file", {})),
        {"raw": "[]"},
        {"raw": '{"choices": "a string"}'},
        {"no_choices": True},
        {"content": None},
    ]
    srv = fake_server([plan(task())] + garbage + [make_done(), finish()])
    proc = _agent_run(agent_in_process, srv, repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    done = events(proc.stdout)[-1]
    assert done["message"].startswith("the model sent 10 malformed replies in a row")
    assert len(srv.chat_requests) == 11  # stopped right after the tenth
    state = read_state(repo)
    assert state["status"] == "failed" and state["steps"] == 10
    shown = [e["step"] for e in events(proc.stdout) if e["event"] == "tool_result"]
    assert shown[-1] == 10, shown  # the step that stops the run is shown too
    runs = json.loads(agent_in_process("runs", "--json", cwd=repo).stdout)
    assert [r["status"] for r in runs] == ["failed"]
