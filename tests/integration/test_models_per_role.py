"""A model per role: planner, executor and verifier each on a loopback server of its own."""

from __future__ import annotations

import socket

import pytest

from conftest import DOCTOR_REPLIES, git
from reliability.relkit import (
    GOAL,
    call,
    events,
    finish,
    make_done,
    plan,
    read_state,
    repo_with,
    roles_env,
    task,
)

pytestmark = pytest.mark.slow

PRICES = {"AGENT_PRICE_INPUT_PER_MTOK": "1.0", "AGENT_PRICE_OUTPUT_PER_MTOK": "2.0"}
ADAPT = {"AGENT_REPLAN": "after_task", "AGENT_FINAL_SUMMARY": "true"}


def used(prompt: int, completion: int) -> dict:
    return {"usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def test_each_request_goes_to_its_roles_server_and_usage_is_told_per_role(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    planner = fake_server(
        [
            {**plan(task(), task("Write NOTES.md", None)), **used(100, 10)},
            {**call("revise_plan", keep=True), **used(100, 10)},
            {**call("submit_facts", facts=[]), **used(100, 10)},
            {"content": "Made done.txt and NOTES.md.", **used(100, 10)},
        ],
        models=("plan-model",),
    )
    executor = fake_server(
        [
            {**make_done(), **used(1000, 20)},
            {**finish("made done.txt"), **used(1000, 20)},
            {**make_done("NOTES.md", "notes\n"), **used(1000, 20)},
            {**finish("wrote NOTES.md"), **used(1000, 20)},
        ],
        models=("exec-model",),
    )
    verifier = fake_server(
        [{**call("submit_verdict", verdict="pass", reason="NOTES.md is there"), **used(50, 5)}],
        models=("verify-model",),
    )
    proc = agent_in_process(
        "run",
        "Create done.txt and NOTES.md",
        "--yes",
        "--json",
        cwd=repo,
        env={**ADAPT, **PRICES, **roles_env(planner, executor, verifier)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # planning, the re-plan check, the facts and the closing summary: the planner's server
    assert [tool_names(r) for r in planner.chat_requests] == [
        ["submit_plan"],
        ["revise_plan"],
        ["submit_facts"],
        [],
    ]
    assert {r["model"] for r in planner.chat_requests} == {"plan-model"}
    # every step of both tasks: the executor's
    assert len(executor.chat_requests) == 4
    for request in executor.chat_requests:
        assert {"write_file", "finish"} <= set(tool_names(request)) and request["model"] == (
            "exec-model"
        )
    # the task without an acceptance command is judged on the verifier's
    assert [tool_names(r) for r in verifier.chat_requests] == [["submit_verdict"]]
    assert verifier.chat_requests[0]["model"] == "verify-model"

    done = events(proc.stdout)[-1]
    assert done["event"] == "run_done"
    by_role = done["usage_by_role"]
    assert by_role["planner"] == {
        "model": "plan-model",
        "prompt_tokens": 400,
        "completion_tokens": 40,
        "cached_tokens": 0,
        "cost_usd": pytest.approx((400 * 1.0 + 40 * 2.0) / 1e6),
        "calls": 4,
    }
    assert by_role["executor"]["model"] == "exec-model"
    assert (by_role["executor"]["prompt_tokens"], by_role["executor"]["calls"]) == (4000, 4)
    assert by_role["executor"]["cost_usd"] == pytest.approx((4000 + 80 * 2.0) / 1e6)
    assert by_role["verifier"]["model"] == "verify-model"
    assert (by_role["verifier"]["prompt_tokens"], by_role["verifier"]["calls"]) == (50, 1)
    # the totals are the roles' sum, as before
    assert done["prompt_tokens"] == 4450 and done["completion_tokens"] == 125
    assert done["cost_usd"] == pytest.approx(sum(u["cost_usd"] for u in by_role.values()))
    state = read_state(repo)
    assert state is not None
    assert state["usage"]["by_role"]["verifier"]["prompt_tokens"] == 50
    saved = state["started_with"]
    assert saved["executor_base_url"] == executor.url and saved["verifier_model"] == "verify-model"


def test_the_terminal_report_shows_usage_per_role(agent_in_process, fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    planner = fake_server(
        [{**plan(task()), **used(100, 10)}, {**call("submit_facts", facts=[]), **used(10, 1)}]
    )
    executor = fake_server(
        [{**make_done(), **used(1000, 20)}, {**finish("made done.txt"), **used(10, 2)}],
        models=("exec-model",),
    )
    env = {
        "AGENT_BASE_URL": planner.url,
        "AGENT_EXECUTOR_BASE_URL": executor.url,
        "AGENT_EXECUTOR_MODEL": "exec-model",
    }
    proc = agent_in_process("run", "Create done.txt", "--yes", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("by role:"))
    assert "planner gpt-4o-mini 110 + 11 tokens" in line
    assert "executor exec-model 1,010 + 22 tokens" in line
    assert "verifier gpt-4o-mini 0 + 0 tokens" in line
    assert len(planner.chat_requests) == 2 and len(executor.chat_requests) == 2


def test_a_resumed_run_keeps_each_roles_endpoint_and_model(agent_in_process, fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    planner = fake_server([plan(task()), call("submit_facts", facts=[])], models=("plan-model",))
    executor = fake_server([make_done(), finish("made done.txt")], models=("exec-model",))
    verifier = fake_server([], models=("verify-model",))
    env = roles_env(planner, executor, verifier)
    first = agent_in_process(
        "run", "Create done.txt", "--yes", "--json", "--max-steps", "1", cwd=repo, env=env
    )
    assert first.returncode == 4, first.stdout + first.stderr  # the step budget ran out
    # the next session names no endpoint nor model: each role goes on where it started
    resumed = agent_in_process("run", "--resume", "--yes", "--json", "--max-steps", "9", cwd=repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(executor.chat_requests) == 2 and len(planner.chat_requests) == 2
    assert {r["model"] for r in executor.chat_requests} == {"exec-model"}
    notice = next(e["text"] for e in events(resumed.stdout) if "goes on" in e.get("text", ""))
    assert f"executor model exec-model at {executor.url}" in notice
    assert "executor_base_url" in notice and "--executor" not in notice
    by_role = events(resumed.stdout)[-1]["usage_by_role"]
    assert by_role["executor"]["calls"] == 2 and by_role["planner"]["calls"] == 2


def test_without_role_keys_one_server_gets_every_request_as_before(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [
            {**plan(task()), **used(100, 10)},
            {**make_done(), **used(1000, 20)},
            {**finish("made done.txt"), **used(10, 2)},
            {**call("submit_facts", facts=[]), **used(10, 1)},
        ]
    )
    proc = agent_in_process("run", "Create done.txt", "--yes", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(srv.chat_requests) == 4
    assert "by role" not in proc.stdout  # the report is the one it always was
    state = read_state(repo)
    assert state is not None
    assert state["usage"]["prompt_tokens"] == 1120
    assert not any("executor" in k or "planner" in k for k in state["started_with"])
    by_role = state["usage"]["by_role"]
    assert {u["model"] for u in by_role.values()} == {"gpt-4o-mini"}
    assert (by_role["planner"]["prompt_tokens"], by_role["executor"]["prompt_tokens"]) == (
        110,
        1010,
    )
    assert by_role["verifier"]["calls"] == 0


def test_doctor_checks_each_distinct_endpoint_once(agent_in_process, fake_server, scratch_repo):
    probe = DOCTOR_REPLIES  # a tiny forced call, then a plan-sized one
    shared = fake_server(probe, models=("big",))  # the planner's and the verifier's
    # The executor never plans: its server is not asked for a plan-sized reply.
    executor = fake_server(probe[:1], models=("small",))
    env = {
        "AGENT_BASE_URL": shared.url,
        "AGENT_MODEL": "big",
        "AGENT_VERIFIER_BASE_URL": shared.url,
        "AGENT_EXECUTOR_BASE_URL": executor.url,
        "AGENT_EXECUTOR_MODEL": "small",
    }
    proc = agent_in_process("doctor", cwd=scratch_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # what doctor asks of the one endpoint of a run without roles, each endpoint is asked once
    alone = fake_server(probe, models=("big",))
    reference = agent_in_process(
        "doctor", "--base-url", alone.url, "--model", "big", cwd=scratch_repo
    )
    assert reference.returncode == 0, reference.stdout + reference.stderr
    once = sorted(r["path"] for r in alone.requests)  # the window probes run side by side
    assert once.count("/v1/chat/completions") == 2
    assert sorted(r["path"] for r in shared.requests) == once
    asked = sorted(r["path"] for r in executor.requests)
    assert asked == [p for i, p in enumerate(once) if i != once.index("/v1/chat/completions")]
    assert f"for planner, verifier: {shared.url} answers" in proc.stdout
    assert f"for executor: {executor.url} answers" in proc.stdout
    endpoint_lines = [x for x in proc.stdout.splitlines() if " endpoint " in x]
    assert len(endpoint_lines) == 2


@pytest.mark.parametrize("lapse", ["revoke", "change"])
def test_a_resume_drops_the_endpoint_a_repository_file_gave_once_it_is_not_trusted(
    agent_in_process, fake_server, tmp_path, lapse
):
    named = fake_server([make_done()], models=("exec-model",))  # the repository's endpoint
    users = fake_server(
        [plan(task()), finish("made done.txt"), call("submit_facts", facts=[])],
        models=("plan-model", "exec-model"),
    )
    rc = f'executor_base_url = "{named.url}"\nexecutor_model = "exec-model"\n'
    repo = repo_with(tmp_path / "repo", {".agentrc": rc})
    env = {"AGENT_BASE_URL": users.url, "AGENT_MODEL": "plan-model"}
    assert agent_in_process("trust", cwd=repo, env=env).returncode == 0
    first = agent_in_process(
        "run", "Create done.txt", "--yes", "--json", "--max-steps", "1", cwd=repo, env=env
    )
    assert first.returncode == 4, first.stdout + first.stderr
    assert len(named.chat_requests) == 1  # trusted: the executor worked at the file's endpoint
    assert read_state(repo)["started_with"]["from_repo"] == ["executor_base_url", "executor_model"]
    if lapse == "revoke":
        assert agent_in_process("trust", "--revoke", cwd=repo, env=env).returncode == 0
    else:
        (repo / ".agentrc").write_text(rc + "# a pull changed the file\n")
        git(repo, "commit", "-qam", "the pulled change")
    resumed = agent_in_process(
        "run", "--resume", "--yes", "--json", "--max-steps", "9", cwd=repo, env=env
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(named.chat_requests) == 1  # nothing more went to the file's endpoint
    assert [r["model"] for r in users.chat_requests][1:] == ["plan-model", "plan-model"]
    notices = [e["text"] for e in events(resumed.stdout) if e["event"] == "notice"]
    assert any(
        "executor_base_url, executor_model saved with the run came from" in n
        and "not trusted now" in n
        for n in notices
    ), notices


def test_a_roles_refused_key_or_unknown_model_names_the_roles_own_setting(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    planner = fake_server([plan(task())] * 2, models=("plan-model",))
    executor = fake_server([], models=("exec-model",), api_key="the-executors-right-key")
    env = {
        "AGENT_BASE_URL": planner.url,
        "AGENT_MODEL": "plan-model",
        "AGENT_EXECUTOR_BASE_URL": executor.url,
        "AGENT_EXECUTOR_API_KEY_ENV": "EXEC_KEY",
    }
    wrong_key = {**env, "AGENT_EXECUTOR_MODEL": "exec-model", "EXEC_KEY": "a-stale-key-000"}
    done = agent_in_process("run", GOAL, "--yes", cwd=repo, env=wrong_key)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "refused the API key" in done.stdout and "check EXEC_KEY;" in done.stdout
    assert "OPENAI_API_KEY" not in done.stdout
    git(repo, "checkout", "-q", "main")
    typo = {**env, "AGENT_EXECUTOR_MODEL": "exec-modle", "EXEC_KEY": "the-executors-right-key"}
    done = agent_in_process("run", GOAL, "--yes", cwd=repo, env=typo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "model 'exec-modle' was not found" in done.stdout
    assert "set executor_model to a model" in done.stdout and "--model" not in done.stdout


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # bound, then closed: nothing listens there


@pytest.mark.parametrize("wrong", ["executor_base_url", "executor_model"])
def test_a_resume_takes_the_roles_setting_its_error_asked_to_fix(
    agent_in_process, fake_server, tmp_path, wrong
):
    repo = repo_with(tmp_path / "repo")
    planner = fake_server([plan(task()), call("submit_facts", facts=[])], models=("plan-model",))
    executor = fake_server([make_done(), finish("made done.txt")], models=("exec-model",))
    right = {"executor_base_url": executor.url, "executor_model": "exec-model"}
    bad = {**right, wrong: _closed_port_url() if wrong == "executor_base_url" else "exec-modle"}
    env = {"AGENT_BASE_URL": planner.url, "AGENT_MODEL": "plan-model"}
    env_of = {f"AGENT_{k.upper()}": v for k, v in bad.items()}
    first = agent_in_process(
        "run", "Create done.txt", "--yes", "--json", cwd=repo, env={**env, **env_of}
    )
    assert first.returncode == 1, first.stdout + first.stderr
    assert wrong in events(first.stdout)[-1]["message"]  # the error names the setting to fix
    # the user fixes it where they keep their settings, and resumes
    rc = tmp_path / "user.agentrc"
    rc.write_text(f'{wrong} = "{right[wrong]}"\n')
    kept = {k: v for k, v in env_of.items() if k != f"AGENT_{wrong.upper()}"}
    resumed = agent_in_process(
        "run", "--resume", "--yes", "--json", cwd=repo, env={**env, **kept, "AGENT_RC": str(rc)}
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [r["model"] for r in executor.chat_requests][-2:] == ["exec-model", "exec-model"]
    notices = [e["text"] for e in events(resumed.stdout) if e["event"] == "notice"]
    assert (
        f"{wrong}: {right[wrong]} from {rc}, in place of the {bad[wrong]} the run was started with"
        in notices
    )
    assert not any("a flag given now" in n for n in notices)
    assert read_state(repo)["started_with"][wrong] == right[wrong]  # and for the next resume


def test_a_key_refused_by_a_role_at_a_second_local_server_names_its_key_setting(
    agent_in_process, fake_server, tmp_path
):
    # a role at a local server base_url does not name is sent no key: OPENAI_API_KEY cannot fix it
    repo = repo_with(tmp_path / "repo")
    planner = fake_server(DOCTOR_REPLIES + [plan(task())], models=("plan-model",))
    executor = fake_server([], models=("exec-model",), api_key="sk-the-executors-own-0123")
    env = {
        "OPENAI_API_KEY": "sk-the-executors-own-0123",
        "AGENT_BASE_URL": planner.url,
        "AGENT_MODEL": "plan-model",
        "AGENT_EXECUTOR_BASE_URL": executor.url,
        "AGENT_EXECUTOR_MODEL": "exec-model",
    }
    doctor = agent_in_process("doctor", cwd=repo, env=env)
    run = agent_in_process("run", GOAL, "--yes", cwd=repo, env=env)
    assert doctor.returncode == 1 and run.returncode == 1, run.stdout + run.stderr
    (line,) = [x for x in doctor.stdout.splitlines() if "FAIL endpoint" in x]
    for said in (line, run.stdout):
        assert "refused a request sent without a key (401" in said, said
        assert "set executor_api_key_env to the name of the variable" in said
        assert "OPENAI_API_KEY" not in said


def test_a_plan_only_run_needs_no_key_of_a_role_it_does_not_ask(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    planner = fake_server([plan(task())], models=("plan-model",))
    executor = fake_server([], models=("exec-model",))
    env = {
        "AGENT_BASE_URL": planner.url,
        "AGENT_MODEL": "plan-model",
        "AGENT_EXECUTOR_BASE_URL": executor.url,
        "AGENT_EXECUTOR_MODEL": "exec-model",
        "AGENT_EXECUTOR_API_KEY_ENV": "EXECUTOR_KEY_NOT_SET",
    }
    proc = agent_in_process("run", "Create done.txt", "--plan-only", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(planner.chat_requests) == 1 and executor.requests == []
    assert "EXECUTOR_KEY_NOT_SET" not in proc.stdout + proc.stderr
    # the run itself asks the executor: the key it names is needed then, and said
    proc = agent_in_process("run", "Create done.txt", "--yes", cwd=repo, env=env)
    assert proc.returncode != 0 and "EXECUTOR_KEY_NOT_SET" in proc.stdout + proc.stderr
