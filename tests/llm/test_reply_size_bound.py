"""A reply larger than any the agent can use (32 MB as read) is ended with a clear error, whole
or streamed, instead of being held in memory for as long as the server sends it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import pytest

from agent_cli.core.errors import ModelError
from agent_cli.llm.openai.chat import OpenAIChat

ASK = [{"role": "user", "content": "go"}]
MB = 2**20
SENT_MB = 64  # the server gives up after this much: past the bound, yet a test that ends


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
def big_server() -> Iterator[Callable[[Callable[[], Iterator[bytes]], str], str]]:
    """A loopback server that answers every chat request with these pieces, as fast as read."""
    servers: list[ThreadingHTTPServer] = []

    def start(pieces: Callable[[], Iterator[bytes]], kind: str) -> str:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for piece in pieces():
                        self.wfile.write(piece)
                except OSError:
                    pass  # the client hung up

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(srv)
        Thread(target=srv.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


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
