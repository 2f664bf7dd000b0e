"""A reply larger than any the agent can use (32 MB as read) is ended with a clear error, whole
or streamed, instead of being held in memory for as long as the server sends it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from agent_cli.core.errors import ModelError
from agent_cli.llm.openai.chat import OpenAIChat
from httpkit import Answer, loopback, send_pieces

ASK = [{"role": "user", "content": "go"}]
MB = 2**20
SENT_MB = 64  # the server gives up after this much: past the bound, yet a test that ends

__all__ = ["loopback"]


def _whole_pieces() -> Iterator[bytes]:
    yield b'{"choices": [{"index": 0, "message": {"content": "'
    for _ in range(SENT_MB):
        yield b"x" * MB
    yield b'"}, "finish_reason": "stop"}]}'


def _stream_pieces() -> Iterator[bytes]:
    piece = {"choices": [{"index": 0, "delta": {"content": "x" * MB}, "finish_reason": None}]}
    for _ in range(SENT_MB):
        yield f"data: {json.dumps(piece)}\n\n".encode()
    yield b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'


@pytest.fixture
def big_server(
    loopback: Callable[[Answer], str],
) -> Callable[[Callable[[], Iterator[bytes]], str], str]:
    """A loopback server that answers every chat request with these pieces, as fast as read."""
    return lambda pieces, kind: loopback(lambda h: send_pieces(h, pieces(), kind))


@pytest.mark.parametrize(
    ("pieces", "kind", "stream"),
    [(_whole_pieces, "application/json", False), (_stream_pieces, "text/event-stream", True)],
)
def test_a_reply_past_32_mb_is_ended(big_server, pieces, kind, stream):
    model = OpenAIChat(
        model="m", base_url=big_server(pieces, kind), api_key=None, stream=stream, max_retries=2
    )
    with pytest.raises(ModelError, match="the reply was larger than 32 MB"):
        model.chat(ASK)
