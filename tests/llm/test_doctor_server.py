"""`agent doctor` tells what the server can do, through the CLI's entry point against the loopback
server."""

import json

from conftest import DOCTOR_REPLIES

CALL, PLAN = DOCTOR_REPLIES


def _doctor(agent_in_process, srv, repo):
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=repo)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc, proc.stdout[proc.stdout.index("checks") :]


def test_doctor_against_a_llama_cpp_like_server(agent_in_process, fake_server, scratch_repo):
    srv = fake_server(
        [CALL, PLAN], models=("gpt-4o-mini",), n_ctx=4096, object_choice="ignore", stream="whole"
    )
    proc, out = _doctor(agent_in_process, srv, scratch_repo)
    assert proc.returncode == 0, proc.stdout
    assert "context window 4,096 tokens (from llama.cpp /props)" in out
    assert 'forced single tool works (tool_choice "required")' in out
    assert "streaming: no, whole replies" in out
    assert (
        'a run will use: whole replies, tool_choice "required", replies up to 1,024 '
        "tokens, working memory 752 and tool output 614 tokens"
    ) in out
    assert len(srv.chat_requests) == 2  # one tiny request, then one plan-sized
    assert srv.chat_requests[1]["tools"][0]["function"]["name"] == "submit_plan"
    assert srv.chat_requests[1]["tool_choice"] == "required"  # a value servers accept
    assert srv.chat_requests[1]["max_tokens"] == 1024  # the room a run leaves a plan


def test_doctor_against_a_vllm_like_server_that_refuses_required(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server(
        [CALL, PLAN], models=("gpt-4o-mini",), max_model_len=32768, required_choice="refuse"
    )
    proc, out = _doctor(agent_in_process, srv, scratch_repo)
    assert proc.returncode == 0, proc.stdout
    assert "context window 32,768 tokens (from vLLM /v1/models)" in out
    assert 'forced single tool works (tool_choice {"type": "function"' in out
    assert "streaming: yes" in out


def test_doctor_against_a_server_that_forces_only_through_structured_output(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server(
        [CALL, PLAN],
        models=("gpt-4o-mini",),
        n_ctx=4096,
        object_choice="ignore",
        required_choice="ignore",
    )
    proc, out = _doctor(agent_in_process, srv, scratch_repo)
    assert proc.returncode == 0, proc.stdout
    assert (
        "forced single tool works (a json_schema response_format of the tool's parameters)"
    ) in out
    assert [r.get("response_format", {}).get("type") for r in srv.chat_requests][:3] == [
        None,
        None,
        "json_schema",
    ]
    assert "submit_plan" in json.dumps(srv.chat_requests[-1])  # the plan-sized check


def test_doctor_fails_when_no_form_of_forcing_gets_a_call(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server(
        [CALL, PLAN],
        models=("gpt-4o-mini",),
        ollama_ctx=8192,
        object_choice="ignore",
        required_choice="ignore",
        schema_choice="ignore",
    )
    proc, out = _doctor(agent_in_process, srv, scratch_repo)
    fails = [line for line in out.splitlines() if "FAIL" in line]
    assert proc.returncode == 1 and len(fails) == 1
    assert "server" in fails[0] and "did not call a forced tool" in fails[0]
    assert [r.get("tool_choice") for r in srv.chat_requests] == [
        "required",
        {"type": "function", "function": {"name": "report_status"}},
        "none",
    ]
    assert srv.chat_requests[2]["response_format"]["json_schema"]["name"] == "report_status"


def test_doctor_names_the_served_models_for_a_model_the_server_does_not_know(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server([CALL, PLAN], models=("qwen2.5-coder:7b",))  # like vLLM or Ollama: 404
    proc, out = _doctor(agent_in_process, srv, scratch_repo)
    assert proc.returncode == 1
    assert (
        "FAIL endpoint     model 'gpt-4o-mini' is not served by" in out
        and "set --model to one of: qwen2.5-coder:7b" in out
    )


def test_doctor_accepts_any_model_name_on_a_server_that_answers_to_it(
    agent_in_process, fake_server, scratch_repo
):
    srv = fake_server(
        [CALL, CALL, PLAN], models=("/models/small.gguf",), n_ctx=4096, any_model=True
    )
    proc, out = _doctor(agent_in_process, srv, scratch_repo)
    assert proc.returncode == 0, proc.stdout
    assert (
        "answers; it lists '/models/small.gguf' but answers requests for 'gpt-4o-mini' too"
    ) in out


def test_doctor_fails_when_a_plan_sized_reply_is_cut_at_the_length_limit(
    agent_in_process, fake_server, scratch_repo
):
    cut = {"content": "", "finish_reason": "length"}
    srv = fake_server([CALL, cut], models=("gpt-4o-mini",), n_ctx=4096)
    proc, out = _doctor(agent_in_process, srv, scratch_repo)
    fails = [line for line in out.splitlines() if "FAIL" in line]
    assert proc.returncode == 1 and len(fails) == 1, out
    assert "forced single tool works, but a plan-sized reply was cut at the length limit" in out
    # a reply already gets a quarter of the 4,096 the server reports: only a larger context helps
    assert "replies get up to 1,024 tokens here: serve the model with a larger context" in out
    assert "llama.cpp: -c" in out and "raise reserved_output_tokens" not in out


def test_a_server_too_busy_to_answer_is_not_said_to_lack_the_model(
    agent_in_process, fake_server, scratch_repo
):
    # The one-token request that asks whether an unlisted name is served gets no answer in
    # time: that says nothing of the model, so doctor says the server did not answer.
    srv = fake_server(
        [{**CALL, "delay": 5}, CALL, PLAN], models=("/models/small.gguf",), any_model=True
    )
    proc = agent_in_process(
        "doctor", "--base-url", srv.url, cwd=scratch_repo, env={"AGENT_REQUEST_TIMEOUT_S": "1"}
    )
    out = proc.stdout[proc.stdout.index("checks") :]
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert "did not answer in time" in out and "is not served by" not in out, out


def test_doctor_fits_each_line_to_the_smallest_window_of_the_roles(
    agent_in_process, fake_server, scratch_repo
):
    # A run fits working memory and tool output to the smallest window of its roles: the
    # planner's larger server is said to be used with the executor's 4,096-token fit.
    planner = fake_server([CALL, PLAN], models=("big",), n_ctx=32768)
    executor = fake_server([CALL], models=("small",), n_ctx=4096)
    env = {
        "AGENT_BASE_URL": planner.url,
        "AGENT_MODEL": "big",
        "AGENT_EXECUTOR_BASE_URL": executor.url,
        "AGENT_EXECUTOR_MODEL": "small",
    }
    proc = agent_in_process("doctor", cwd=scratch_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    used = [line for line in proc.stdout.splitlines() if "a run will use" in line]
    fitted = (
        "working memory 752 and tool output 614 tokens "
        "(fitted to the 4,096-token window of the executor endpoint, the smallest)"
    )
    assert len(used) == 2 and fitted in used[0], proc.stdout  # the planner's, at 32,768
    assert used[1].endswith("working memory 752 and tool output 614 tokens"), proc.stdout
