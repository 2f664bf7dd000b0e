"""`agent run --resume` goes on against the endpoint, model and limits the run was started with."""

from __future__ import annotations

import json
import os
import signal

import pytest
from runkit import (
    BAD_MEDIAN,
    GOAL,
    GOOD_MEDIAN,
    add_median,
    events_of,
    finish,
    plan,
    read_stats,
    replace_median,
    state_of,
    task,
)

from agent_cli.llm.fake.server import FakeOpenAIServer
from conftest import git
from reliability import relkit as rel
from reliability.relkit import spawn_agent, wait_for

__all__ = ["spawn_agent"]  # a fixture

pytestmark = pytest.mark.slow
NO_KEY = {"OPENAI_BASE_URL": ""}  # the default endpoint (api.openai.com) needs a key
MODELS = ("local", "other", "gpt-4o-mini")


def escalated_against(agent_in_process, fake_server, repo, *extra):
    """A run started with --base-url/--model that stops at a rejected task (exit 3)."""
    srv = fake_server(
        [plan(task()), add_median(BAD_MEDIAN), finish("first try"), finish("second try")],
        models=MODELS,
    )
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, "--model", "local", *extra, cwd=repo
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    return srv, proc


def fixed() -> list[dict]:
    return [replace_median(BAD_MEDIAN, GOOD_MEDIAN), finish("fixed")]


def test_resume_with_no_flag_continues_against_the_server_and_model_it_started_with(
    agent_in_process, fake_server, demo_repo
):
    srv, proc = escalated_against(agent_in_process, fake_server, demo_repo)
    done = events_of(proc.stdout)[-1]
    assert done["event"] == "run_done"
    assert (
        done["message"]
        == f"task 1 needs you; `agent run --resume` continues with model local at {srv.url}"
    )
    saved = state_of(demo_repo)["started_with"]
    assert (saved["base_url"], saved["model"]) == (srv.url, "local")
    assert saved["max_steps"] == 200 and saved["budget_usd"] == 5.0
    port = srv.port
    srv.stop()
    again = fake_server(
        fixed(), port=port, models=MODELS
    )  # the same server, served again at the same URL
    proc = agent_in_process("run", "--resume", "--yes", "--json", cwd=demo_repo, env=NO_KEY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert again.chat_requests and {r["model"] for r in again.chat_requests} == {"local"}
    notices = [e["text"] for e in events_of(proc.stdout) if e["event"] == "notice"]
    assert any(f"as it was started with model local at {again.url}" in n for n in notices)
    assert events_of(proc.stdout)[-1]["exit_code"] == 0


def test_a_flag_given_at_resume_wins_and_is_saved_for_the_next_resume(
    agent_in_process, fake_server, demo_repo
):
    escalated_against(agent_in_process, fake_server, demo_repo)
    other = fake_server(fixed(), models=MODELS)
    proc = agent_in_process(
        "run",
        "--resume",
        "--yes",
        "--json",
        "--base-url",
        other.url,
        "--model",
        "other",
        cwd=demo_repo,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {r["model"] for r in other.chat_requests} == {"other"}
    saved = state_of(demo_repo)["started_with"]
    assert (saved["base_url"], saved["model"]) == (other.url, "other")


def test_the_limits_it_started_with_hold_when_resumed_without_flags(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task())] + [read_stats()] * 10)
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, "--max-steps", "3", cwd=demo_repo
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert state_of(demo_repo)["started_with"]["max_steps"] == 3
    port = srv.port
    srv.stop()
    again = fake_server([read_stats()] * 10, port=port)
    proc = agent_in_process("run", "--resume", "--yes", "--json", cwd=demo_repo, env=NO_KEY)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    ev = [e for e in events_of(proc.stdout) if e["event"] == "budget_exhausted"]
    assert ev and ev[0]["limit"] == 3
    # raising the limit on the command line lets it go on
    proc = agent_in_process(
        "run", "--resume", "--yes", "--json", "--max-steps", "5", cwd=demo_repo, env=NO_KEY
    )
    ev = [e for e in events_of(proc.stdout) if e["event"] == "budget_exhausted"]
    assert ev and ev[0]["limit"] == 5, proc.stdout + proc.stderr
    assert again.chat_requests


def test_the_api_key_is_never_saved(agent_in_process, fake_server, demo_repo):
    key = "sk-test-resume-0123456789abcdef"
    srv = FakeOpenAIServer(
        [plan(task()), add_median(BAD_MEDIAN), finish("a"), finish("b")], api_key=key
    ).start()
    try:
        proc = agent_in_process(
            "run",
            GOAL,
            "--yes",
            "--json",
            "--base-url",
            srv.url,
            cwd=demo_repo,
            env={"OPENAI_API_KEY": key},
        )
    finally:
        srv.stop()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    state = state_of(demo_repo)
    assert "api_key" not in state["started_with"] and key not in json.dumps(state)


def test_a_tampered_saved_endpoint_stops_the_resume_naming_the_file(
    agent_in_process, fake_server, demo_repo
):
    escalated_against(agent_in_process, fake_server, demo_repo)
    path = sorted((demo_repo / ".agent" / "runs").glob("*/state.json"))[-1]
    data = json.loads(path.read_text())
    data["started_with"]["base_url"] = "file:///etc/passwd"
    path.write_text(json.dumps(data))
    proc = agent_in_process("run", "--resume", "--yes", cwd=demo_repo, env=NO_KEY)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "started_with.base_url" in lines[0] and str(path) in lines[0]


def test_ctrl_c_then_the_printed_hint_alone_continues_against_the_same_server(
    spawn_agent, agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task()), {**read_stats(), "delay": 60}], models=MODELS)
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, "--model", "local", cwd=demo_repo
    )
    wait_for(lambda: len(srv.chat_requests) == 2, what="the run waiting for the model")
    os.kill(agent.pid, signal.SIGINT)  # what Ctrl-C sends
    assert agent.wait(timeout=30) == 130, agent.stdout + agent.stderr
    done = events_of(agent.stdout)[-1]
    assert done["event"] == "run_done" and done["exit_code"] == 130
    assert done["message"] == (
        "interrupted; the state is saved: continue with "
        f"`agent run --resume` (with model local at {srv.url})"
    )
    port = srv.port
    srv.stop()
    again = fake_server([add_median(GOOD_MEDIAN), finish()], port=port, models=MODELS)
    proc = agent_in_process("run", "--resume", "--yes", "--json", cwd=demo_repo, env=NO_KEY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert again.chat_requests and {r["model"] for r in again.chat_requests} == {"local"}


def test_a_resumed_runs_episode_keeps_the_tools_of_its_earlier_session(
    agent_in_process, fake_server, demo_repo
):
    first = fake_server(
        [plan(task()), read_stats(), add_median(BAD_MEDIAN), finish("one"), finish("two")],
        models=MODELS,
    )
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", first.url, "--model", "local", cwd=demo_repo
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr  # read_file was called here only
    again = fake_server(fixed(), models=MODELS)
    proc = agent_in_process(
        "run", "--resume", "--hint", "mind the even case", "--yes", "--json",
        "--base-url", again.url, cwd=demo_repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = agent_in_process("recall", GOAL, "--kind", "episode", "--json", cwd=demo_repo)
    (episode,) = json.loads(found.stdout)
    assert episode["metadata"]["tools_used"] == ["edit_file", "finish", "read_file"]


def test_a_resumed_runs_episode_counts_the_attempts_of_every_session(
    agent_in_process, fake_server, demo_repo
):
    first = fake_server(
        [plan(task()), add_median(BAD_MEDIAN), finish("one"), finish("two")], models=MODELS
    )
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", first.url, "--model", "local", cwd=demo_repo
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr  # two attempts, rejected
    again = fake_server(fixed(), models=MODELS)  # no answer: the task starts afresh, and passes
    proc = agent_in_process(
        "run", "--resume", "--yes", "--json", "--base-url", again.url, cwd=demo_repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = agent_in_process("recall", GOAL, "--kind", "episode", "--json", cwd=demo_repo)
    (episode,) = json.loads(found.stdout)
    assert "(verified, 3 attempts)" in episode["text"], episode["text"]


def test_accept_given_to_a_resume_is_the_final_check_from_then_on(
    agent_in_process, fake_server, demo_repo
):
    escalated_against(agent_in_process, fake_server, demo_repo)  # started without --accept
    srv = fake_server(fixed(), models=MODELS)
    refused = agent_in_process(
        "run", "--resume", "--yes", "--json", "--accept", "true", "--base-url", srv.url,
        cwd=demo_repo,
    )  # fmt: skip
    assert refused.returncode == 2 and "--accept: " in events_of(refused.stdout)[-1]["message"]
    assert srv.chat_requests == []  # refused before any request
    proc = agent_in_process(
        "run", "--resume", "--yes", "--json", "--accept", "python -m pytest -q",
        "--base-url", srv.url, cwd=demo_repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    final = [e for e in events_of(proc.stdout) if e["event"] == "verify" and e["index"] == -1]
    assert [(e["command"], e["passed"]) for e in final] == [("python -m pytest -q", True)]
    assert state_of(demo_repo)["accept_cmds"] == ["python -m pytest -q"]


def test_ctrl_c_while_the_closing_summary_is_asked_for_leaves_a_verified_run_verified(
    spawn_agent, fake_server, demo_repo
):
    from runkit import facts

    summary = {"content": "Added median().", "delay": 60}
    srv = fake_server([plan(task()), add_median(), finish(), facts(), summary])
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo,
        env={"AGENT_FINAL_SUMMARY": "true"},
    )  # fmt: skip
    wait_for(lambda: len(srv.chat_requests) == 5, what="the closing summary's request")
    os.kill(agent.pid, signal.SIGINT)  # what Ctrl-C sends
    assert agent.wait(timeout=30) == 0, agent.stdout + agent.stderr
    shown = events_of(agent.stdout)
    assert shown[-1]["event"] == "run_done" and shown[-1]["status"] == "verified"
    assert any("the run's outcome stands (verified)" in e.get("text", "") for e in shown)
    assert state_of(demo_repo)["status"] == "verified"


def test_run_state_the_repository_tracks_is_refused_and_its_endpoint_never_asked(
    agent_in_process, fake_server, demo_repo, tmp_path
):
    # a repository that committed its .agent/ (a run started against its author's server),
    # cloned: resuming that run would send the cloner's code and key to that server
    planted, _ = escalated_against(agent_in_process, fake_server, demo_repo)
    git(demo_repo, "add", "-f", ".agent")  # its runs, and its long-term memory
    git(demo_repo, "commit", "-q", "-m", "the run state, committed")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(demo_repo), str(clone))
    for name, value in (("user.email", "test@example.com"), ("user.name", "Test")):
        git(clone, "config", name, value)
    asked_before = len(planted.chat_requests)
    mine = fake_server(fixed(), models=MODELS)
    commands = (["run", "--resume", "--yes"], ["runs"], ["recall", "median"], ["memory", "show"])
    for args in commands:
        proc = agent_in_process(*args, cwd=clone, env={"OPENAI_BASE_URL": mine.url})
        said = proc.stderr.strip()
        assert proc.returncode != 0 and len(said.splitlines()) == 1, proc.stdout + said
        assert "the repository tracks" in said and ".agent/" in said and "Traceback" not in said
        assert "git rm -r --cached .agent" in said
    assert len(planted.chat_requests) == asked_before and not mine.chat_requests
    git(clone, "rm", "-r", "-q", "--cached", ".agent")
    git(clone, "commit", "-q", "-m", "run state is not the repository's")
    for args in commands[1:]:
        assert agent_in_process(*args, cwd=clone).returncode == 0


MAIN_KEY = "sk-main-openai-key-0123456789abcdef"
EXEC_KEY = "exec-provider-key-0123456789abcdef"


def authorization(requests: list[dict]) -> list[str | None]:
    """The Authorization header of each request an endpoint received."""
    return [{k.lower(): v for k, v in r["headers"].items()}.get("authorization") for r in requests]


def stopped_at_a_hosted_executor(agent_in_process, fake_server, tmp_path, **env):
    """A run whose executor is at an endpoint of its own that is not a local server (127.1 is
    this machine, yet not local to the host check: it stands for another provider's host),
    stopped by that endpoint failing; the executor's server answers the resume."""
    repo = rel.repo_with(tmp_path / "repo")
    planner = fake_server([rel.plan(rel.task()), rel.no_facts(), rel.no_facts()])
    executor = fake_server(
        [{"status": 503, "body": "overloaded"}] * 3
        + [rel.make_done(), rel.finish("made done.txt")],
        models=("exec-model",),
    )
    hosted = executor.url.replace("127.0.0.1", "127.1")
    env = {
        "OPENAI_API_KEY": MAIN_KEY,
        "AGENT_MAX_RETRIES": "0",
        "AGENT_BASE_URL": planner.url,
        "AGENT_EXECUTOR_BASE_URL": hosted,
        "AGENT_EXECUTOR_MODEL": "exec-model",
        **env,
    }
    first = agent_in_process("run", "Create done.txt", "--yes", cwd=repo, env=env)
    assert first.returncode == 1, first.stdout + first.stderr
    assert executor.requests
    return repo, executor, hosted


def test_a_resume_sends_a_roles_saved_endpoint_the_key_of_the_variable_it_was_started_with(
    agent_in_process, fake_server, tmp_path
):
    own = {"AGENT_EXECUTOR_API_KEY_ENV": "EXEC_KEY", "EXEC_KEY": EXEC_KEY}
    repo, executor, hosted = stopped_at_a_hosted_executor(
        agent_in_process, fake_server, tmp_path, **own
    )
    assert set(authorization(executor.requests)) == {f"Bearer {EXEC_KEY}"}
    state = rel.read_state(repo)
    saved = state["started_with"]
    assert (saved["executor_api_key_env"], saved["api_key_env"]) == ("EXEC_KEY", "OPENAI_API_KEY")
    assert "planner_api_key_env" not in saved  # at base_url: the API key, as base_url is sent
    assert MAIN_KEY not in json.dumps(state) and EXEC_KEY not in json.dumps(state)
    asked = len(executor.requests)
    # a shell with the API key alone: the executor's endpoint is not sent it, nor anything
    proc = agent_in_process("run", "--resume", "--yes", cwd=repo, env={"OPENAI_API_KEY": MAIN_KEY})
    said = proc.stderr.strip()
    assert proc.returncode == 1 and len(said.splitlines()) == 1, proc.stdout + said
    assert f"the executor endpoint {hosted} of this run takes its key from EXEC_KEY" in said
    assert "export EXEC_KEY=..." in said and "Traceback" not in said
    assert len(executor.requests) == asked
    # with its variable set it goes on, sent that key
    env = {"OPENAI_API_KEY": MAIN_KEY, "EXEC_KEY": EXEC_KEY}
    proc = agent_in_process("run", "--resume", "--yes", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"executor model exec-model at {hosted} with its key from EXEC_KEY" in proc.stdout
    assert len(executor.requests) > asked
    assert set(authorization(executor.requests)) == {f"Bearer {EXEC_KEY}"}


def test_a_key_variable_the_user_sets_now_replaces_the_saved_one_said_in_a_notice(
    agent_in_process, fake_server, tmp_path
):
    own = {"AGENT_EXECUTOR_API_KEY_ENV": "EXEC_KEY", "EXEC_KEY": EXEC_KEY}
    repo, executor, _ = stopped_at_a_hosted_executor(agent_in_process, fake_server, tmp_path, **own)
    asked = len(executor.requests)
    env = {"AGENT_EXECUTOR_API_KEY_ENV": "ROTATED", "ROTATED": "exec-rotated-key-0123456789"}
    proc = agent_in_process("run", "--resume", "--yes", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "executor_api_key_env: ROTATED from AGENT_EXECUTOR_API_KEY_ENV, in place of the "
        "EXEC_KEY the run was started with"
    ) in proc.stdout
    assert set(authorization(executor.requests[asked:])) == {"Bearer exec-rotated-key-0123456789"}
    assert rel.read_state(repo)["started_with"]["executor_api_key_env"] == "ROTATED"


@pytest.mark.parametrize("saved_by", ["this version", "an earlier version"])
def test_a_roles_saved_endpoint_gets_the_api_key_only_when_the_run_says_it_was_sent_it(
    agent_in_process, fake_server, tmp_path, saved_by
):
    # the executor had no key variable of its own: its endpoint was sent the API key
    repo, executor, hosted = stopped_at_a_hosted_executor(agent_in_process, fake_server, tmp_path)
    assert set(authorization(executor.requests)) == {f"Bearer {MAIN_KEY}"}
    path = rel.state_files(repo)[-1]
    state = json.loads(path.read_text())
    assert state["started_with"]["executor_api_key_env"] == "OPENAI_API_KEY"
    if saved_by == "an earlier version":  # it saved the endpoint, not the key's variable
        del state["started_with"]["executor_api_key_env"], state["started_with"]["api_key_env"]
        path.write_text(json.dumps(state))
    asked = len(executor.requests)
    main = {"OPENAI_API_KEY": MAIN_KEY}
    proc = agent_in_process("run", "--resume", "--yes", cwd=repo, env=main)
    if saved_by == "this version":  # sent the key it was started with
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert set(authorization(executor.requests)) == {f"Bearer {MAIN_KEY}"}
        return
    said = proc.stderr.strip()
    assert proc.returncode == 1 and len(said.splitlines()) == 1, proc.stdout + said
    assert f"the key the executor endpoint {hosted} was sent" in said
    assert "set executor_api_key_env to the variable that holds its key" in said
    assert len(executor.requests) == asked  # asked nothing, sent no key
    # naming the role's key variable is the answer: that key, no other, goes there
    env = {**main, "AGENT_EXECUTOR_API_KEY_ENV": "EXEC_KEY", "EXEC_KEY": EXEC_KEY}
    proc = agent_in_process("run", "--resume", "--yes", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(authorization(executor.requests[asked:])) == {f"Bearer {EXEC_KEY}"}
