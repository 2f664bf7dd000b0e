"""Replies that are JSON only to a lenient parser: non-finite numbers, absurd integers, nesting
that exhausts recursion. In the body (its usage included), whole or streamed, each is a
MalformedReply (which the loop counts and feeds back), never an internal error. Inside one
tool call's arguments they are passed on as written: the tool explains them to the model
(tests/reliability/test_crashes_hangs_and_resources.py)."""

import json

import pytest

from agent_cli.core import strictjson
from agent_cli.core.errors import MalformedReply
from agent_cli.llm.base import function_tool
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.llm.wire.body import load_body, parse_completion
from httpkit import loopback, send

__all__ = ["loopback"]

READ = function_tool(
    "read_file", "Read.", {"path": {"type": "string"}, "start_line": {"type": "integer"}}
)
ASK = [{"role": "user", "content": "go"}]
DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "9" * 5000
MAX_COUNT = 10**12  # the largest token count believed


def _body(
    usage: str = '{"prompt_tokens": 1, "completion_tokens": 1}', arguments: str = '{"path": "a"}'
) -> str:
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "read_file", "arguments": arguments},
    }
    return (
        '{"choices": [{"index": 0, "finish_reason": "tool_calls", "message": '
        f'{{"role": "assistant", "content": null, "tool_calls": [{json.dumps(call)}]}}}}], '
        f'"usage": {usage}}}'
    )


BAD_BODIES = {
    "Infinity in usage": _body(usage='{"prompt_tokens": Infinity, "completion_tokens": 1}'),
    "NaN in usage": _body(usage='{"prompt_tokens": 1, "completion_tokens": NaN}'),
    "1e999 in usage": _body(usage='{"prompt_tokens": 1e999, "completion_tokens": 1}'),
    "5,000 digits in usage": _body(usage=f'{{"prompt_tokens": {HUGE}, "completion_tokens": 1}}'),
    "deep body": '{"choices": ' + DEEP + "}",
    "moderately deep body": '{"choices": [{"message": ' + "[" * 200 + "]" * 200 + "}]}",
    "content of the wrong type": '{"choices": [{"message": {"content": {"a": 1}}}]}',
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_a_strange_whole_reply_is_malformed_not_a_crash(fake_server, name):
    srv = fake_server([{"raw": BAD_BODIES[name]}])
    m = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, stream=False)
    with pytest.raises(MalformedReply):
        m.chat(ASK, [READ], "auto")
    assert m.usage.calls == 0


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_the_parser_alone_refuses_the_same(name):
    with pytest.raises(MalformedReply):
        parse_completion(load_body(BAD_BODIES[name]))


def test_strange_numbers_in_a_streamed_chunk_are_malformed(fake_server):
    srv = fake_server([{"content": "hi", "usage": {"prompt_tokens": float("inf")}}])
    with pytest.raises(MalformedReply, match="streamed reply"):
        OpenAIChat(model="fake-model", base_url=srv.url, api_key=None).chat(ASK, [READ], "auto")


@pytest.mark.parametrize(
    "arguments", ['{"path": "a", "start_line": NaN}', '{"path": ' + "[" * 500 + "]" * 500 + "}"]
)
def test_strange_arguments_are_passed_on_for_the_tool_to_explain(fake_server, arguments):
    srv = fake_server([{"tool_calls": [{"name": "read_file", "arguments": arguments}]}])
    reply = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None).chat(ASK, [READ], "auto")
    assert reply.tool_calls[0].arguments == arguments


def test_cut_off_arguments_are_passed_on_for_the_tool_to_explain(fake_server):
    srv = fake_server([{"tool_calls": [{"name": "read_file", "arguments": '{"path": "a'}]}])
    reply = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None).chat(ASK, [READ], "auto")
    assert reply.tool_calls[0].arguments == '{"path": "a'


def test_ordinary_numbers_and_nesting_still_parse():
    body = _body(
        usage='{"prompt_tokens": 12.0, "completion_tokens": 3}',
        arguments='{"path": "a", "start_line": 10, "deep": ' + "[" * 30 + "]" * 30 + "}",
    )
    reply = parse_completion(load_body(body))
    assert (
        reply.usage.prompt_tokens == 12
        and json.loads(reply.tool_calls[0].arguments)["start_line"] == 10
    )


ODD_USAGE = {
    "a float past any count": ('{"prompt_tokens": 7, "completion_tokens": 1e45}', 7, MAX_COUNT),
    "a 30-digit integer": ('{"prompt_tokens": ' + "9" * 30 + "}", MAX_COUNT, 0),
    "a count as text": ('{"prompt_tokens": "12", "completion_tokens": 3}', 0, 3),
    "a count as a list": ('{"prompt_tokens": [1, 2], "completion_tokens": 3}', 0, 3),
    "a negative count": ('{"prompt_tokens": -4, "completion_tokens": 2.9}', 0, 2),
    "usage as a list": ("[1, 2]", 0, 0),
    "details as text": ('{"prompt_tokens": 5, "prompt_tokens_details": "x"}', 5, 0),
}


@pytest.mark.parametrize("name", list(ODD_USAGE))
def test_odd_token_counts_cost_only_their_numbers(fake_server, name):
    usage, prompt, completion = ODD_USAGE[name]
    srv = fake_server([{"raw": _body(usage=usage)}])
    m = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, stream=False)
    reply = m.chat(ASK, [READ], "auto")
    assert reply.tool_calls[0].name == "read_file"
    assert (m.usage.prompt_tokens, m.usage.completion_tokens) == (prompt, completion)
    # the totals are saved with the run's state and read back strictly on resume
    assert strictjson.loads(m.usage.model_dump_json())["completion_tokens"] == completion


PARTS = [
    {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
    {"type": "text", "text": "Hello, "},
    {"type": "text", "text": "world."},
]


def test_content_sent_as_a_list_of_parts_is_its_text(fake_server):
    # Mistral's reasoning models and some gateways send content as parts; the text is theirs.
    whole = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": PARTS}}]}
    srv = fake_server([{"raw": json.dumps(whole)}], stream="whole")
    reply = OpenAIChat(model="gpt-4o-mini", base_url=srv.url, api_key=None).chat(ASK)
    assert reply.content == "Hello, world."


def test_streamed_content_parts_are_its_text(loopback):
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": PARTS[:2]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": PARTS[2:]}, "finish_reason": "stop"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    url = loopback(lambda h: send(h, body, "text/event-stream"))
    assert OpenAIChat(model="m", base_url=url, api_key=None).chat(ASK).content == "Hello, world."


def test_a_text_part_without_text_is_malformed():
    with pytest.raises(MalformedReply):
        parse_completion({"choices": [{"message": {"content": [{"type": "text"}]}}]})


def test_null_arguments_are_a_call_without_arguments_whole_as_streamed(fake_server):
    # Some servers send `"arguments": null` for a call of a tool without required arguments:
    # a stream that sends none gives no text, and a whole reply now gives the same.
    from agent_cli.agent.attempt.toolbox import parse_arguments

    call = {"id": "c", "type": "function", "function": {"name": "list_dir", "arguments": None}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    whole = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}
    srv = fake_server([{"raw": json.dumps(whole)}], stream="whole")
    model = OpenAIChat(model="gpt-4o-mini", base_url=srv.url, api_key=None)
    (got,) = model.chat(ASK, [READ], "auto").tool_calls
    assert got.arguments == "" and parse_arguments(got) == {}


def test_arguments_encoded_twice_are_the_object_they_hold(fake_server):
    # Some servers and gateways send the arguments' JSON text as a JSON string of it.
    twice = json.dumps(json.dumps({"path": "a.py"}))
    srv = fake_server([{"tool_calls": [{"name": "read_file", "arguments": twice}]}])
    reply = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None).chat(ASK, [READ], "auto")
    assert json.loads(reply.tool_calls[0].arguments) == {"path": "a.py"}
