"""A loopback OpenAI-compatible server that replays scripted replies; for tests and demos.

Each step of a script is one reply to one chat-completion request:

    {"tool": "read_file", "args": {"path": "x.py"}}        one tool call
    {"tool_calls": [{"name": ..., "arguments": {...} | "raw json text"}, ...]}
    {"content": "plain text"}
    {"status": 500, "body": "..."}                          an HTTP error
    {"status": 429, "headers": {"Retry-After": "2"}, ...}   with these response headers
    {"raw": "not json"}                                     a garbage body
    {"no_choices": true}                                    a reply with no choices
    {"delay": 1.5, ...}                                     sleep first, then the rest
    {"chunk_delay": 0.2, ...}                               a slow stream: sleep between chunks
    {"cut": 3, ...}                                         a stream dropped after 3 chunks
    {"unfinished": true, ...}                               a stream ended in good order but
                                                            with no finish_reason, no [DONE]
    {"finish_reason": "length", ...}                        override the finish reason
    {"keepalive": 30, ...}                                  30 s of `: ping` comments first
                                                            (a whole reply: a trickle of spaces)

A step may also carry "usage": {"prompt_tokens": n, "completion_tokens": m,
"prompt_tokens_details": {"cached_tokens": c}} and llama.cpp's "timings": {"cache_n": c}.
`script` may be a callable `(request_json) -> step` instead of a list (`routes.ByGoal` is
one for many runs at once: each run's replies by its goal, after a delay like a model's). Every request is
recorded in `server.requests` (path, headers, parsed body) so tests can assert on what was
sent. A request with `stream: true` is answered with server-sent events (chunked), unless
the `Behaviour` (see `fake_replies`) makes the server act like one that cannot.
`server.max_in_flight` is the most chat requests it was ever working on at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent_cli.llm.fake.replies import (
    Behaviour,
    Step,
    completion_body,
    refusal,
    stream_chunks,
    structured,
)

__all__ = ["Behaviour", "FakeOpenAIServer", "completion_body", "fake_embedding"]


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words point the same way."""
    vec = [0.0] * dim
    for word in re.findall(r"[a-z0-9_]+", text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


class FakeOpenAIServer:
    """Serves /chat/completions from a script, /models and /embeddings, on 127.0.0.1 by default."""

    def __init__(
        self,
        script: list[Step] | Callable[[dict[str, Any]], Step] | None = None,
        *,
        models: tuple[str, ...] = ("gpt-4o-mini", "fake-model"),
        api_key: str | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        behaviour: Behaviour | None = None,
        **behave: Any,
    ) -> None:
        self.script = script if script is not None else []
        self.models = models
        self.api_key = api_key
        self.behaviour = behaviour or Behaviour(**behave)
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._served = 0
        self._lock = threading.Lock()
        self.host = host
        self._httpd = _QuietServer((host, port), _Handler)
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._httpd.daemon_threads = True
        # A short poll interval: stop() waits for it, once per server in every test.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL to give an OpenAI client (ends in /v1)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def port(self) -> int:
        """The port it listens on (the one asked for, or the one the system chose for 0)."""
        return int(self._httpd.server_address[1])

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The parsed bodies of every chat-completion request, in order."""
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; a server whose loop is not running (never
        started, or ended) is only closed: shutdown() would wait for that loop forever."""
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _working(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def next_step(self, body: dict[str, Any]) -> Step:
        """The script step for this request; a 500 naming the problem once the script ends."""
        with self._lock:
            n = self._served
            self._served += 1
        if callable(self.script):
            return self.script(body)
        if n < len(self.script):
            return self.script[n]
        return {
            "status": 500,
            "body": json.dumps(
                {"error": {"message": f"fake server: script has only {len(self.script)} replies"}}
            ),
        }


_PING_EVERY_S = 0.05


class _QuietServer(ThreadingHTTPServer):
    """A client that goes away (a finished `agent` process drops its kept-alive connection) is
    not an error worth a traceback on stderr; anything else still is."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Answers one connection's requests from the FakeOpenAIServer it belongs to."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes: with Nagle's algorithm on, the body of every
    # response after the first on a kept-alive connection waits for the client's delayed ACK
    # (40 ms on Linux). Real servers set TCP_NODELAY too.
    disable_nagle_algorithm = True

    @property
    def fake(self) -> FakeOpenAIServer:
        fake: FakeOpenAIServer = self.server.fake  # type: ignore[attr-defined]
        return fake

    def log_message(self, *args: Any) -> None:
        pass

    def _send(
        self,
        status: int,
        body: str | bytes,
        ctype: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, data: Any, status: int = 200) -> None:
        self._send(status, json.dumps(data))

    def _authorised(self) -> bool:
        key = self.fake.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._json(
            {
                "error": {
                    "message": "Incorrect API key provided",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            401,
        )
        return False

    def _loading(self) -> bool:
        """Answer as llama.cpp does while it loads its model, when the behaviour says it does."""
        if not self.fake.behaviour.loading:
            return False
        error = {"code": 503, "message": "Loading model", "type": "unavailable_error"}
        self._json({"error": error}, 503)
        return True

    def do_GET(self) -> None:
        fake, b = self.fake, self.fake.behaviour
        fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": None})
        if not self._authorised() or self._loading():
            return
        path = self.path.rstrip("/")
        if path.endswith("/models"):
            data = [
                {
                    "id": m,
                    "object": "model",
                    "owned_by": "fake",
                    **(
                        {"max_model_len": b.max_model_len}
                        if b.max_model_len and not b.hide_window
                        else {}
                    ),
                }
                for m in fake.models
            ]
            self._json({"object": "list", "data": data})
        elif path == "/props" and b.n_ctx and not b.hide_window:
            self._json({"default_generation_settings": {"n_ctx": b.n_ctx}, "total_slots": 1})
        elif path == "/slots" and b.slots:
            self._json([{"id": 0, "is_processing": fake.in_flight > 0}])
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode(errors="replace")}
        self.fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if not self._authorised() or self._loading():
            return
        if self.path.endswith("/embeddings"):
            self._embeddings(body)
        elif self.path.endswith("/chat/completions"):
            self.fake._working(+1)
            try:
                self._chat(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up on this reply
            finally:
                self.fake._working(-1)
        elif self.path == "/api/show" and self.fake.behaviour.ollama_ctx:
            self._json(
                {
                    "parameters": f'num_ctx {self.fake.behaviour.ollama_ctx}\nstop "<|eot|>"',
                    "model_info": {"llama.context_length": 131072},
                }
            )
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def _embeddings(self, body: dict[str, Any]) -> None:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        data = [
            {"object": "embedding", "index": i, "embedding": fake_embedding(t)}
            for i, t in enumerate(texts)
        ]
        self._json(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        )

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.fake
        if body.get("model") not in fake.models and not fake.behaviour.any_model:
            self._json(
                {
                    "error": {
                        "message": f"The model `{body.get('model')}` does not exist",
                        "code": "model_not_found",
                    }
                },
                404,
            )
            return
        step = refusal(body, fake.behaviour) or structured(fake.next_step(body), body)
        if step.get("delay"):
            time.sleep(float(step["delay"]))
        if "status" in step:
            self._send(int(step["status"]), step.get("body", "{}"), headers=step.get("headers"))
        elif "raw" in step:
            self._send(200, step["raw"], headers=step.get("headers"))
        else:
            reply = completion_body(step, body["model"], len(fake.requests))
            if body.get("stream") and fake.behaviour.stream in ("sse", "no_usage"):
                self._stream(reply, step, body)
            elif step.get("keepalive"):
                self._trickle(json.dumps(reply).encode(), float(step["keepalive"]))
            else:
                self._json(reply)

    def _trickle(self, data: bytes, seconds: float) -> None:
        """A whole reply whose body starts with a space every 50 ms for `seconds`."""
        spaces = max(1, int(seconds / _PING_EVERY_S))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(spaces + len(data)))
        self.end_headers()
        for _ in range(spaces):
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(_PING_EVERY_S)
        self.wfile.write(data)

    def _stream(self, reply: dict[str, Any], step: Step, body: dict[str, Any]) -> None:
        """The reply as server-sent events over chunked transfer encoding."""
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = stream_chunks(reply, include_usage)
        if step.get("unfinished"):  # the reply's end never said: no finish_reason, no [DONE]
            for c in chunks:
                for choice in c["choices"]:
                    choice["finish_reason"] = None
        events = [f"data: {json.dumps(c)}\n\n" for c in chunks]
        if not step.get("unfinished"):
            events.append("data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        until = time.monotonic() + float(step.get("keepalive") or 0)
        while time.monotonic() < until:  # a server that keeps the stream open, saying nothing
            self.wfile.write(b"8\r\n: ping\n\n\r\n")
            self.wfile.flush()
            time.sleep(_PING_EVERY_S)
        for n, event in enumerate(events):
            if "cut" in step and n >= int(step["cut"]):
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)  # dropped mid-reply: no closing chunk
                return
            data = event.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            if step.get("chunk_delay"):
                time.sleep(float(step["chunk_delay"]))
        self.wfile.write(b"0\r\n\r\n")


def main(argv: list[str] | None = None) -> int:
    """Serve a JSON script until interrupted; 2 with one line on stderr for a bad script."""
    args = _parser().parse_args(argv)
    try:
        script = json.loads(Path(args.script).read_text(encoding="utf-8")) if args.script else []
    except (OSError, UnicodeDecodeError) as e:
        return _usage_error(f"cannot read the script {args.script}: {getattr(e, 'strerror', e)}")
    except ValueError as e:
        return _usage_error(f"the script {args.script} is not JSON: {e}")
    if not isinstance(script, list) or not all(isinstance(s, dict) for s in script):
        return _usage_error(f"the script {args.script} must be a JSON list of reply steps")
    try:
        srv = FakeOpenAIServer(script, port=args.port, host=args.host)
    except OSError as e:
        return _usage_error(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}")
    with srv:
        print(srv.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent_cli.llm.fake_server",
        description="A loopback OpenAI-compatible server that answers chat requests with the "
        "scripted replies of SCRIPT.json, in order, and prints its base URL.",
    )
    parser.add_argument(
        "script", nargs="?", metavar="SCRIPT.json", help="a JSON list of reply steps"
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    return parser


def _usage_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
