"""A loopback HTTP server for answers the shipped fake server cannot give: `answer(handler)`
writes the whole response to each request (GET or POST), whose body has been read."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import pytest

Answer = Callable[[BaseHTTPRequestHandler], None]


@pytest.fixture
def loopback() -> Iterator[Callable[[Answer], str]]:
    """Start a server answering with `answer`; returns its base URL (…/v1). Stopped at the end."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> str:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer(self)

            do_GET = do_POST = _any

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(srv)
        Thread(target=srv.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def send(handler: BaseHTTPRequestHandler, body: str, kind: str, status: int = 200) -> None:
    """A whole response: `body` with its length."""
    data = body.encode()
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def send_pieces(handler: BaseHTTPRequestHandler, pieces: Iterable[bytes], kind: str) -> None:
    """A response of no stated length, written piece by piece until the client hangs up."""
    handler.send_response(200)
    handler.send_header("Content-Type", kind)
    handler.send_header("Connection", "close")
    handler.end_headers()
    try:
        for piece in pieces:
            handler.wfile.write(piece)
    except OSError:
        pass  # the client hung up


def trickled(body: bytes, pause_s: float) -> Answer:
    """An answer that sends `body` as JSON a byte at a time, `pause_s` apart: each byte starts
    a client's read timeout again, so only a bound on the whole exchange ends it."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            for byte in body:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(pause_s)
        except OSError:
            pass  # the client hung up

    return answer
