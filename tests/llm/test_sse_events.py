"""Server-sent events as the specification has them, from a loopback server: an event's data
over several `data:` lines, any line ending, and, tolerated, events with no blank line between."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from agent_cli.core.errors import ModelError
from agent_cli.llm.openai.chat import OpenAIChat
from httpkit import Answer, loopback, send, send_pieces

ASK = [{"role": "user", "content": "go"}]

__all__ = ["loopback"]


def _chunk(text: str, finish: str | None = None) -> str:
    return json.dumps(
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    )


@pytest.fixture
def sse_body_server(loopback: Callable[[Answer], str]) -> Callable[[str], str]:
    """A loopback server that answers every chat request with this event-stream body."""
    return lambda body: loopback(lambda h: send(h, body, "text/event-stream"))


def _content(url: str) -> str | None:
    return OpenAIChat(model="m", base_url=url, api_key=None).chat(ASK).content


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_an_event_over_several_data_lines_is_one_chunk(sse_body_server, eol):
    first, second = _chunk("hel"), _chunk("lo", "stop")
    half = second.index('"finish_reason"')  # between two tokens, as a server splits it
    body = eol.join(
        [
            ": a comment",
            f"data: {first}",
            "",
            "event: message",
            f"data: {second[:half]}",
            f"data:{second[half:]}",
            "id: 7",
            "",
            "data: [DONE]",
            "",
            "",
        ]
    )
    assert _content(sse_body_server(body)) == "hello"


def test_events_with_no_blank_line_between_them_are_still_read(sse_body_server):
    body = f"data: {_chunk('hel')}\ndata: {_chunk('lo', 'stop')}\ndata: [DONE]\n"
    assert _content(sse_body_server(body)) == "hello"


def test_a_last_event_with_no_blank_line_after_it_is_read(sse_body_server):
    assert _content(sse_body_server(f"data: {_chunk('hi', 'stop')}")) == "hi"


@pytest.mark.parametrize("kind", ["text/plain", "application/json", "application/octet-stream"])
def test_a_stream_under_another_content_type_is_read_as_a_stream(
    loopback: Callable[[Answer], str], kind: str
):
    # Some servers and proxies send their events under another content type: the body's
    # first bytes, not its header, say that it is a stream.
    body = f"\n: ping\n\ndata: {_chunk('hel')}\n\ndata: {_chunk('lo', 'stop')}\n\ndata: [DONE]\n\n"
    model = OpenAIChat(model="m", base_url=loopback(lambda h: send(h, body, kind)), api_key=None)
    assert model.chat(ASK).content == "hello"
    assert model.streaming  # still a streaming server: the next request is streamed too


def test_a_whole_reply_under_a_plain_content_type_is_still_read_whole(
    loopback: Callable[[Answer], str],
):
    whole = {"choices": [{"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}]}
    url = loopback(lambda h: send(h, "  \n" + json.dumps(whole), "text/plain"))
    model = OpenAIChat(model="m", base_url=url, api_key=None)
    assert model.chat(ASK).content == "whole" and not model.streaming


@pytest.mark.parametrize("after", ["", "\n\ndata: [DONE]\n\n"])
def test_a_whole_reply_under_the_event_stream_content_type_is_read_whole(sse_body_server, after):
    # Jan's server and some proxies label a whole completion text/event-stream (some end it
    # with `data: [DONE]`): it was read as an empty stream, and asked for again and again.
    call = {"id": "c1", "type": "function", "function": {"name": "note", "arguments": "{}"}}
    whole = {
        "choices": [
            {
                "index": 0,
                "message": {"content": "whole", "tool_calls": [call]},
                "finish_reason": "stop",
            }
        ]
    }
    url = sse_body_server(json.dumps(whole) + after)
    model = OpenAIChat(model="m", base_url=url, api_key=None, max_retries=0)
    reply = model.chat(ASK)
    assert reply.content == "whole" and [c.name for c in reply.tool_calls] == ["note"]
    assert not model.streaming  # it answers whole: whole requests from now on


def test_a_stream_left_open_after_its_finish_reason_is_taken_as_it_is(
    loopback: Callable[[Answer], str],
):
    # The reply is over at its finish_reason: a server that then sends neither [DONE] nor
    # the end of the body has given it whole, and asking again would only do the same.
    def pieces() -> Iterator[bytes]:
        yield f"data: {_chunk('hel')}\n\ndata: {_chunk('lo', 'stop')}\n\n".encode()
        time.sleep(3)  # silent, the stream still open

    url = loopback(lambda h: send_pieces(h, pieces(), "text/event-stream"))
    model = OpenAIChat(model="m", base_url=url, api_key=None, timeout_s=0.5, max_retries=0)
    reply = model.chat(ASK)
    assert (reply.content, reply.finish_reason) == ("hello", "stop")


def test_a_stream_sent_to_a_request_for_a_whole_reply_is_read_as_a_stream(sse_body_server):
    # Some servers stream whatever `stream` asked for: a whole request gets events too.
    body = f"data: {_chunk('hel')}\n\ndata: {_chunk('lo', 'stop')}\n\ndata: [DONE]\n\n"
    model = OpenAIChat(model="m", base_url=sse_body_server(body), api_key=None, stream=False)
    assert model.chat(ASK).content == "hello"


def test_a_stream_that_ends_in_the_middle_of_a_chunk_is_asked_again(
    loopback: Callable[[Answer], str],
):
    # A body that ends (in good order, to its EOF) halfway through a chunk's JSON was cut:
    # the request is sent again, not the model told its reply was malformed.
    whole = f"data: {_chunk('hel')}\n\ndata: {_chunk('lo', 'stop')}\n\ndata: [DONE]\n\n"
    answers: list[str] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        answers.append(whole if answers else whole[: whole.index("[DONE]") - 30])
        send_pieces(h, [answers[-1].encode()], "text/event-stream")

    model = OpenAIChat(model="m", base_url=loopback(answer), api_key=None, backoff_s=0.01)
    assert model.chat(ASK).content == "hello" and len(answers) == 2


_HELLO = f"data: {_chunk('hel')}\n\ndata: {_chunk('lo', 'stop')}\n\ndata: [DONE]\n\n"


def _asked_twice(loopback: Callable[[Answer], str], first: str, **keys: Any) -> OpenAIChat:
    """A model whose server streams `first`, then a good "hello" to every request after it;
    `keys` go to OpenAIChat. The reply is "hello" after two requests."""
    answers: list[str] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        answers.append(_HELLO if answers else first)
        send(h, answers[-1], "text/event-stream")

    model = OpenAIChat(model="m", base_url=loopback(answer), api_key=None, backoff_s=0.01, **keys)
    assert model.chat(ASK).content == "hello" and len(answers) == 2
    return model


def test_words_in_place_of_a_chunk_are_the_servers_failure_and_asked_again(
    loopback: Callable[[Answer], str],
):
    # A proxy's own words in the stream (no JSON at all) are its failure, not the model's
    # malformed reply: the request is sent again.
    bad = f"data: {_chunk('hel')}\n\ndata: upstream connect error or disconnect/reset\n\n"
    retries: list[str] = []
    _asked_twice(loopback, bad, on_retry=lambda n, of, d, why: retries.append(why))
    assert "upstream connect error" in retries[0]


def test_an_error_event_whose_code_blames_the_request_is_not_sent_again(
    loopback: Callable[[Answer], str],
):
    # OpenRouter reports a provider's refusal mid-stream with its code: a 400 is a verdict
    # on the request, as it is in a whole reply's error object.
    error = {
        "error": {"code": 400, "message": "Provider returned error: invalid tool schema"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    answers: list[int] = []

    def answer(h: BaseHTTPRequestHandler) -> None:
        answers.append(1)
        send(h, f"data: {json.dumps(error)}\n\n", "text/event-stream")

    model = OpenAIChat(model="m", base_url=loopback(answer), api_key=None, backoff_s=0.01)
    with pytest.raises(ModelError, match=r"rejected the request \(400: Provider returned error"):
        model.chat(ASK)
    assert len(answers) == 1


def test_a_reply_the_server_ended_with_finish_reason_error_is_asked_again(
    loopback: Callable[[Answer], str],
):
    # OpenRouter ends a generation that failed upstream with finish_reason "error": the
    # words before it are no reply the model finished.
    failed = f"data: {_chunk('hal')}\n\ndata: {_chunk('', 'error')}\n\ndata: [DONE]\n\n"
    _asked_twice(loopback, failed)
