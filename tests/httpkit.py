"""A loopback HTTP server for answers the shipped fake server cannot give: `answer(handler)`
writes the whole response to each request (GET or POST), whose body has been read."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import pytest

Answer = Callable[[BaseHTTPRequestHandler], None]
TENANT = "/api/v2/tenants/default_tenant"
# What the probe and chromadb's client ask while the client is made, and Chroma's answers.
CHROMA_OPENING = {
    "/api/v2/heartbeat": {"nanosecond heartbeat": 1},
    f"{TENANT}/databases/default_database": {
        "id": "00000000-0000-0000-0000-000000000001",
        "name": "default_database",
        "tenant": "default_tenant",
    },
    "/api/v2/auth/identity": {
        "user_id": "",
        "tenant": "default_tenant",
        "databases": ["default_database"],
    },
    TENANT: {"name": "default_tenant"},
}


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


def chroma_until_opened(rest: Answer) -> Answer:
    """Chroma's answers to what is asked until chromadb's client is made (`CHROMA_OPENING`);
    `rest` answers every later request (the collections')."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        body = CHROMA_OPENING.get(handler.path.split("?")[0])
        if body is None:
            rest(handler)
        else:
            send(handler, json.dumps(body), "application/json")

    return answer
