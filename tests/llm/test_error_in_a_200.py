"""A gateway that answers HTTP 200 with an error object instead of a completion (OpenRouter
does): the server's own words reach the user as a model error, retried like a busy server
unless its code blames the request; never "malformed replies" or "did not call" a tool."""

from __future__ import annotations

import json

import pytest

from agent_cli.core.errors import MalformedReply, ModelError
from agent_cli.llm.base import force, function_tool
from agent_cli.llm.openai.chat import OpenAIChat

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
    model = _model(srv, max_retries=1, on_retry=lambda n, wait, why: notices.append(why))
    assert model.chat(ASK).content == "fine"
    assert notices == ["upstream overloaded"]


@pytest.mark.parametrize(
    "body", [_error("model not allowed", 400), {"raw": '{"error": "quota exceeded"}'}]
)
def test_an_error_that_blames_the_request_is_not_sent_again(fake_server, body):
    srv = fake_server([body] * 3)
    with pytest.raises(ModelError, match="instead of a reply: (model not allowed|quota)"):
        _model(srv, max_retries=2).chat(ASK)
    assert len(srv.chat_requests) == (1 if "400" in body["raw"] else 3)
