"""A reply that never comes, only kept alive, ends the request with a clear error in time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agent_cli.core.errors import ModelError
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.llm.wire.stream import StreamStalled, paced
from httpkit import loopback, send_pieces

__all__ = ["loopback"]

ASK = [{"role": "user", "content": "go"}]


def _model(server, **kw) -> OpenAIChat:
    return OpenAIChat(model="fake-model", base_url=server.url, api_key=None, backoff_s=0.01, **kw)


def test_a_stream_of_keep_alive_comments_ends_after_the_timeout(fake_server):
    srv = fake_server([{"keepalive": 60, "content": "never"}], slots=False)
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        _model(srv, timeout_s=1.0, max_retries=0).chat(ASK)
    assert time.monotonic() - started < 15  # the comments would keep it open for 60 s
    assert "sent only keep-alive comments and no reply for 1 s" in str(caught.value)


def test_a_reply_that_goes_on_past_its_total_bound_is_ended(fake_server):
    # data keeps arriving, each chunk within the timeout, but the whole reply takes too long
    srv = fake_server([{"content": "word " * 40, "chunk_delay": 0.1}], slots=False)
    with pytest.raises(ModelError) as caught:
        _model(srv, timeout_s=1.0, total_timeout_s=0.5, max_retries=3).chat(ASK)
    assert "the reply went on for over 0.5 s" in str(caught.value)
    assert len(srv.chat_requests) == 1  # the bound is not tried again


def test_a_whole_reply_trickled_a_space_at_a_time_is_ended(fake_server):
    srv = fake_server([{"keepalive": 60, "content": "never"}], stream="whole", slots=False)
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        _model(srv, timeout_s=1.0, total_timeout_s=1.0, stream=False).chat(ASK)
    assert time.monotonic() - started < 15
    assert "the reply went on for over 1 s" in str(caught.value)


def test_paced_counts_only_reply_data_as_progress():
    now = [0.0]

    def clock() -> float:
        return now[0]

    def lines():
        for line in [b"data: {}\n", b": ping\n", b"\n", b": ping\n", b"data: {}\n", b": ping\n"]:
            now[0] += 0.3
            yield line

    assert len(list(paced(lines(), silence_s=1.0, total_s=10, clock=clock))) == 6
    keepalives = iter([b": ping\n"] * 10)

    def slow():
        for line in keepalives:
            now[0] += 0.4
            yield line

    with pytest.raises(StreamStalled, match="only keep-alive comments"):
        list(paced(slow(), silence_s=1.0, total_s=10, clock=clock))


def test_an_event_stream_of_blank_lines_alone_ends_after_the_timeout(loopback):
    # Blank lines are no reply data: an event stream of nothing else is silence.
    def blank_lines() -> Iterator[bytes]:
        for _ in range(200):  # 10 s of them
            yield b"\n"
            time.sleep(0.05)

    url = loopback(lambda h: send_pieces(h, blank_lines(), "text/event-stream"))
    model = OpenAIChat(model="m", base_url=url, api_key=None, timeout_s=0.5, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ModelError, match="only keep-alive comments and no reply for 0.5 s"):
        model.chat(ASK)
    assert time.monotonic() - started < 5  # not the whole-reply bound of 15 s
