"""A memory server that answers its heartbeat, then stops answering, never hangs a run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.place import ChromaServer
from embedkit import HashEmbedder
from httpkit import CHROMA_OPENING as ANSWERS
from httpkit import TENANT


class StopsAnswering:
    """A loopback server that answers `answered` paths like Chroma and holds every other
    request open without a reply until it is stopped."""

    def __init__(self, answered: set[str]) -> None:
        self.answered = answered
        self.release = threading.Event()
        self.held: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path in outer.answered:
                    body = json.dumps(ANSWERS[path]).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                outer.held.append(path)
                outer.release.wait(60)

            do_POST = do_GET

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stops_answering() -> Iterator[type[StopsAnswering]]:
    servers: list[StopsAnswering] = []

    def make(answered: set[str]) -> StopsAnswering:
        servers.append(StopsAnswering(answered))
        return servers[-1]

    yield make  # type: ignore[misc]
    for server in servers:
        server.stop()


def _first_recall(server: ChromaServer) -> tuple[list[object], list[str], float]:
    """What `agent run` does before its first request: get memory ready, then recall."""
    notices: list[str] = []
    lazy = LazyLongTermMemory(server, HashEmbedder())
    memory = FallbackLongTerm(lambda: lazy, notices.append)
    started = time.monotonic()
    memory.prepare()
    found = list(memory.recall("retry with backoff"))
    return found, notices, time.monotonic() - started


def test_a_server_that_stops_while_the_client_is_made_is_given_up_with_a_notice(
    stops_answering,
):
    # heartbeat and the probe's database answered; chromadb's identity request never is
    hanging = stops_answering({"/api/v2/heartbeat", f"{TENANT}/databases/default_database"})
    found, notices, elapsed = _first_recall(ChromaServer(hanging.url, timeout_s=1))
    assert "/api/v2/auth/identity" in hanging.held
    assert found == []
    assert elapsed < 20  # without a bound this waits for ever
    assert len(notices) == 1
    assert "did not answer within 3 s (opening the client)" in notices[0]
    assert "goes on without it" in notices[0]


def test_a_server_that_stops_after_the_client_is_made_bounds_each_call(stops_answering):
    hanging = stops_answering(set(ANSWERS))  # the client is made, then nothing answers
    server = ChromaServer(hanging.url, timeout_s=1, call_timeout_s=1)
    found, notices, elapsed = _first_recall(server)
    assert hanging.held  # the client's first request after it was made
    assert found == []
    assert elapsed < 20
    assert len(notices) == 1
    assert "long-term memory is unavailable" in notices[0]
