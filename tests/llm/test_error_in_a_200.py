"""A gateway that answers HTTP 200 with an error object instead of a completion (OpenRouter
does): the server's own words reach the user as a model error, retried like a busy server
unless its code (a status, or a word such as OpenAI's `invalid_api_key`) or its type blames
the request, which is then said as that HTTP status would be; never "malformed replies" or
"did not call" a tool."""

from __future__ import annotations

import json

import pytest

from agent_cli.core.errors import ContextOverflow, MalformedReply, ModelError
from agent_cli.llm.base import force, function_tool
from agent_cli.llm.openai.chat import OpenAIChat
from reliability.relkit import GOAL, repo_with

PLAN = function_tool("submit_plan", "Plan.", {"goal": {"type": "string"}})
ASK = [{"role": "user", "content": "go"}]


def _error(message: str, code: int | None = None) -> dict[str, str]:
    inner: dict[str, object] = {"message": message}
    if code is not None:
        inner["code"] = code
    return {"raw": json.dumps({"error": inner})}


def _model(srv, **kw) -> OpenAIChat:
    return OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01, **kw)


@pytest.mark.parametrize("stream", [True, False])
def test_an_error_in_a_200_is_the_servers_message(fake_server, stream):
    srv = fake_server([_error("Provider returned error", 502)] * 3)
    with pytest.raises(ModelError) as caught:
        _model(srv, stream=stream, max_retries=2).chat(ASK, [PLAN], force("submit_plan"))
    assert not isinstance(caught.value, MalformedReply)
    assert "answered with an error instead of a reply: Provider returned error" in str(caught.value)
    assert len(srv.chat_requests) == 3  # a busy or broken upstream is asked again


def test_an_error_in_a_200_then_a_reply_is_retried(fake_server):
    srv = fake_server([_error("upstream overloaded"), {"content": "fine"}])
    notices: list[str] = []
    model = _model(srv, max_retries=1, on_retry=lambda n, of, wait, why: notices.append(why))
    assert model.chat(ASK).content == "fine"
    assert notices == ["upstream overloaded"]


def test_an_error_that_blames_the_request_is_not_sent_again(fake_server):
    srv = fake_server([_error("model not allowed", 400)] * 3)
    with pytest.raises(ModelError, match=r"\(400: model not allowed"):
        _model(srv, max_retries=2).chat(ASK)
    assert len(srv.chat_requests) == 1


@pytest.mark.parametrize(
    "said",
    [
        "quota exceeded",
        "Your credit balance is too low to access the API",
        "Insufficient credits for this request",
        "Quota exceeded for quota metric 'requests per day'",
    ],
)
def test_words_alone_that_say_the_quota_is_spent_are_not_waited_on(fake_server, said):
    # no code, no type: the words say no wait cures it, so it is not asked again four times
    srv = fake_server([{"raw": json.dumps({"error": said})}] * 3)
    with pytest.raises(ModelError) as caught:
        _model(srv, max_retries=2).chat(ASK)
    assert "the quota of the key sent is used up" in caught.value.message
    assert "waiting does not help" in caught.value.hint and len(srv.chat_requests) == 1


@pytest.mark.parametrize("status", [200, 429])
def test_a_quota_per_minute_is_a_rate_and_is_waited_on(fake_server, status):
    said = "Quota exceeded for quota metric 'Generate Content API requests per minute'"
    body = json.dumps({"error": {"message": said}})
    srv = fake_server([{"raw": body} if status == 200 else {"status": 429, "body": body}] * 3)
    with pytest.raises(ModelError) as caught:
        _model(srv, max_retries=2).chat(ASK)
    assert "used up" not in caught.value.message and len(srv.chat_requests) == 3


KEY = "check OPENAI_API_KEY; it must be a valid key for this endpoint"
# An error object whose code (a status, a word of OpenAI's) or type blames the request or the
# key: said as the same HTTP status would be, and not sent again.
BLAMES = {
    "401 as a number": ({"code": 401}, "refused the API key (401: ", KEY),
    "403 as digits": ({"code": "403"}, "refused the API key (403: ", KEY),
    "invalid_api_key": (
        {"type": "invalid_request_error", "code": "invalid_api_key"},
        "refused the API key (invalid_api_key: ",
        KEY,
    ),
    "authentication_error": ({"type": "authentication_error"}, "refused the API key", KEY),
    "permission_error": ({"type": "permission_error"}, "refused the API key", KEY),
    "model_not_found": (
        {"type": "invalid_request_error", "code": "model_not_found"},
        "model 'fake-model' was not found",
        "set --model to a model the endpoint serves",
    ),
    "insufficient_quota": (
        {"type": "insufficient_quota", "code": "insufficient_quota"},
        "the quota of the key sent is used up",
        "waiting does not help",
    ),
    "invalid_request_error": (
        {"type": "invalid_request_error", "code": None},
        "rejected the request (invalid_request_error: ",
        "check --model",
    ),
}


@pytest.mark.parametrize("name", list(BLAMES))
@pytest.mark.parametrize("stream", [True, False])
def test_an_error_whose_code_or_type_blames_the_request_is_said_as_its_status(
    fake_server, name, stream
):
    fields, said, fix = BLAMES[name]
    body = {"error": {"message": "The model `fake-model` does not exist, or no", **fields}}
    srv = fake_server([{"raw": json.dumps(body)}] * 3)
    with pytest.raises(ModelError) as caught:
        _model(srv, stream=stream, max_retries=2).chat(ASK)
    assert said in caught.value.message and fix in caught.value.hint, caught.value.one_line()
    assert len(srv.chat_requests) == 1


def test_a_rate_limit_code_is_retried_then_said_as_a_429(fake_server):
    body = {
        "error": {"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"}
    }
    srv = fake_server([{"raw": json.dumps(body)}] * 3)
    with pytest.raises(ModelError) as caught:
        _model(srv, max_retries=2).chat(ASK)
    assert "kept rate-limiting the requests (Rate limit reached)" in caught.value.message
    assert len(srv.chat_requests) == 3


def test_a_context_length_code_is_the_overflow_it_names(fake_server):
    # the message names no marker of an overflow: the code alone says it
    body = {
        "error": {
            "message": "Input is longer than this model takes.",
            "code": "context_length_exceeded",
            "n_ctx": 4096,
        }
    }
    srv = fake_server([{"raw": json.dumps(body)}] * 3)
    with pytest.raises(ContextOverflow) as caught:
        _model(srv, max_retries=2).chat(ASK)
    assert caught.value.window == 4096 and len(srv.chat_requests) == 1


def test_a_run_told_its_key_is_wrong_in_a_200_says_so_at_once(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    wrong = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
    srv = fake_server([{"raw": json.dumps({"error": {**wrong, "code": "invalid_api_key"}})}] * 5)
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refused the API key (invalid_api_key: Incorrect API key provided)" in proc.stderr
    assert KEY in proc.stderr and "retry" not in proc.stderr and len(srv.chat_requests) == 1
