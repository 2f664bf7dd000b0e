"""Which tool call a streamed piece belongs to, as servers other than OpenAI's send them: the
whole name repeated in every piece, calls without an `index` told apart by their `id`, an
`index` that is null or text, one id given to several calls. Served over real SSE by a loopback server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agent_cli.llm.base import function_tool
from agent_cli.llm.openai.chat import OpenAIChat
from httpkit import Answer, loopback, send

TOOLS = [
    function_tool("read_file", "Read.", {"path": {"type": "string"}}),
    function_tool("note", "Note.", {"text": {"type": "string"}}),
]
ASK = [{"role": "user", "content": "go"}]
ARGS = '{"path": "a.py"}'

__all__ = ["loopback"]


def _piece(**call: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}


END = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}


@pytest.fixture
def sse_server(loopback: Callable[[Answer], str]) -> Callable[[list[dict[str, Any]]], str]:
    """A loopback server that answers every chat request with these chunks as events."""

    def start(chunks: list[dict[str, Any]]) -> str:
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in [*chunks, END]) + "data: [DONE]\n\n"
        return loopback(lambda h: send(h, body, "text/event-stream"))

    return start


def _calls(url: str) -> list[tuple[str, str, str]]:
    reply = OpenAIChat(model="m", base_url=url, api_key=None).chat(ASK, TOOLS)
    return [(c.id, c.name, c.arguments) for c in reply.tool_calls]


def test_a_name_repeated_whole_in_every_piece_is_taken_once(sse_server):
    url = sse_server(
        [
            _piece(index=0, id="c1", function={"name": "read_file", "arguments": ARGS[:5]}),
            _piece(index=0, id="c1", function={"name": "read_file", "arguments": ARGS[5:]}),
        ]
    )
    assert _calls(url) == [("c1", "read_file", ARGS)]


def test_a_name_in_fragments_is_still_joined(sse_server):
    url = sse_server(
        [
            _piece(index=0, id="c1", function={"name": "read", "arguments": ""}),
            _piece(index=0, function={"name": "_file", "arguments": ARGS}),
        ]
    )
    assert _calls(url) == [("c1", "read_file", ARGS)]


def test_whole_calls_without_an_index_are_told_apart_by_their_ids(sse_server):
    url = sse_server(
        [
            _piece(id="c1", function={"name": "read_file", "arguments": ARGS[:5]}),
            _piece(function={"arguments": ARGS[5:]}),  # no id: more of the same call
            _piece(id="c2", function={"name": "note", "arguments": '{"text": "x"}'}),
        ]
    )
    assert _calls(url) == [("c1", "read_file", ARGS), ("c2", "note", '{"text": "x"}')]


@pytest.mark.parametrize("second", ["note", "read_file"])
def test_calls_that_all_carry_index_0_are_told_apart_by_their_ids(sse_server, second):
    # Older Ollama parsers and LiteLLM's ollama_chat give every parallel call index 0: they
    # were joined into one call whose arguments were two JSON objects back to back.
    other = '{"text": "x"}' if second == "note" else '{"path": "b.py"}'
    url = sse_server(
        [
            _piece(index=0, id="c1", function={"name": "read_file", "arguments": ARGS[:5]}),
            _piece(index=0, function={"arguments": ARGS[5:]}),  # no id: more of the same call
            _piece(index=0, id="c2", function={"name": second, "arguments": other[:4]}),
            _piece(index=0, id="c2", function={"arguments": other[4:]}),
        ]
    )
    assert _calls(url) == [("c1", "read_file", ARGS), ("c2", second, other)]


@pytest.mark.parametrize("index", [None, "0", [0], 0.5])
def test_an_index_that_is_no_number_is_read_not_a_crash(sse_server, index):
    url = sse_server(
        [
            _piece(index=index, id="c1", function={"name": "read_file", "arguments": ARGS}),
            _piece(index=1, id="c2", function={"name": "note", "arguments": '{"text": "x"}'}),
        ]
    )
    assert _calls(url) == [("c1", "read_file", ARGS), ("c2", "note", '{"text": "x"}')]


def test_calls_that_share_an_id_get_ids_of_their_own(sse_server):
    # Each tool result is paired with its call by id: a shared id would pair them wrongly,
    # and a strict server refuses tool results that share one.
    url = sse_server(
        [
            _piece(index=0, id="c1", function={"name": "read_file", "arguments": ARGS}),
            _piece(index=1, id="c1", function={"name": "note", "arguments": '{"text": "x"}'}),
        ]
    )
    assert _calls(url) == [("c1", "read_file", ARGS), ("c1_1", "note", '{"text": "x"}')]


def test_calls_without_an_index_under_one_id_stay_separate_calls(sse_server):
    # Some servers give every call of a reply one id and no index: a piece that brings
    # arguments after the call before it was already whole JSON begins another call.
    url = sse_server(
        [
            _piece(id="c1", function={"name": "read_file", "arguments": ARGS[:5]}),
            _piece(id="c1", function={"name": "read_file", "arguments": ARGS[5:]}),
            _piece(id="c1", function={"name": "note", "arguments": '{"text":'}),
            _piece(id="c1", function={"arguments": ' "x"}'}),
            _piece(id="c1", function={"name": "read_file", "arguments": '{"path": "b.py"}'}),
        ]
    )
    assert _calls(url) == [
        ("c1", "read_file", ARGS),
        ("c1_1", "note", '{"text": "x"}'),
        ("c1_2", "read_file", '{"path": "b.py"}'),
    ]


def test_a_name_repeated_after_whole_arguments_begins_no_call(sse_server):
    url = sse_server(
        [
            _piece(id="c1", function={"name": "read_file", "arguments": ARGS}),
            _piece(id="c1", function={"name": "read_file", "arguments": ""}),
        ]
    )
    assert _calls(url) == [("c1", "read_file", ARGS)]


@pytest.mark.parametrize(
    "name",
    ["functions.read_file", "read_file<|channel|>commentary", " read_file\n", "read_file json"],
)
def test_a_name_left_dressed_by_the_server_is_the_offered_tool(sse_server, name):
    # gpt-oss's harmony format leaves its recipient prefix or channel marker in some servers'
    # tool_calls: the offered tool the name holds is the one called.
    url = sse_server([_piece(index=0, id="c1", function={"name": name, "arguments": ARGS})])
    assert _calls(url) == [("c1", "read_file", ARGS)]


def test_a_name_that_holds_no_offered_tool_is_left_as_it_is(sse_server):
    url = sse_server(
        [_piece(index=0, id="c1", function={"name": "functions.rm", "arguments": ARGS})]
    )
    assert _calls(url) == [("c1", "functions.rm", ARGS)]


@pytest.mark.parametrize("index", [None, "0"])
def test_a_choice_index_sent_as_null_or_text_is_the_first_choice(loopback, index):
    # The choice's text and calls were dropped without a word when its index was no 0.
    chunks = [
        {"choices": [{"index": index, "delta": {"content": "hi"}, "finish_reason": None}]},
        {"choices": [{"index": index, "delta": {}, "finish_reason": "stop"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    url = loopback(lambda h: send(h, body, "text/event-stream"))
    assert OpenAIChat(model="m", base_url=url, api_key=None).chat(ASK).content == "hi"
