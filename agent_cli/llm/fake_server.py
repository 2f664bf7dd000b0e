"""A loopback OpenAI-compatible server that replays scripted replies; for tests and demos.

Each step of a script is one reply to one chat-completion request:

    {"tool": "read_file", "args": {"path": "x.py"}}        one tool call
    {"tool_calls": [{"name": ..., "arguments": {...} | "raw json text"}, ...]}
    {"content": "plain text"}
    {"status": 500, "body": "..."}                          an HTTP error
    {"raw": "not json"}                                     a garbage body
    {"no_choices": true}                                    a reply with no choices
    {"delay": 1.5, ...}                                     sleep first, then the rest

A step may also carry "usage": {"prompt_tokens": n, "completion_tokens": m}. `script` may
be a callable `(request_json) -> step` instead of a list. Every request is recorded in
`server.requests` (path, headers, parsed body) so tests can assert on what was sent.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Step = dict[str, Any]


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words point the same way."""
    vec = [0.0] * dim
    for word in re.findall(r"[a-z0-9_]+", text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def _tool_call(i: int, name: str, arguments: Any) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


def completion_body(step: Step, model: str, n: int) -> dict:
    """The JSON body of a chat completion for one script step."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, **step.get("usage", {})}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    body = {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": model,
            "usage": usage, "choices": []}
    if step.get("no_choices"):
        return body
    calls = step.get("tool_calls") or ([{"name": step["tool"], "arguments": step.get("args", {})}]
                                       if "tool" in step else [])
    message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
    if calls:
        message["tool_calls"] = [_tool_call(n * 100 + i, c["name"], c.get("arguments", {}))
                                 for i, c in enumerate(calls)]
    body["choices"] = [{"index": 0, "message": message,
                        "finish_reason": "tool_calls" if calls else "stop"}]
    return body


class FakeOpenAIServer:
    """Serves /chat/completions from a script, /models and /embeddings, on 127.0.0.1."""

    def __init__(self, script: list[Step] | Callable[[dict], Step] | None = None, *,
                 models: tuple[str, ...] = ("gpt-4o-mini", "fake-model"),
                 api_key: str | None = None, port: int = 0) -> None:
        self.script = script if script is not None else []
        self.models = models
        self.api_key = api_key
        self.requests: list[dict] = []
        self._served = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._httpd.daemon_threads = True
        # A short poll interval: stop() waits for it, once per server in every test.
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        """The base URL to give an OpenAI client (ends in /v1)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[dict]:
        """The parsed bodies of every chat-completion request, in order."""
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def start(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_step(self, body: dict) -> Step:
        """The script step for this request; a 500 naming the problem once the script ends."""
        with self._lock:
            n = self._served
            self._served += 1
        if callable(self.script):
            return self.script(body)
        if n < len(self.script):
            return self.script[n]
        return {"status": 500, "body": json.dumps(
            {"error": {"message": f"fake server: script has only {len(self.script)} replies"}})}


class _Handler(BaseHTTPRequestHandler):
    """Answers one connection's requests from the FakeOpenAIServer it belongs to."""

    protocol_version = "HTTP/1.1"

    @property
    def fake(self) -> "FakeOpenAIServer":
        return self.server.fake  # type: ignore[attr-defined]

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: str | bytes, ctype="application/json") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        if self.fake.api_key is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {self.fake.api_key}":
            return True
        self._send(401, json.dumps({"error": {"message": "Incorrect API key provided",
                                              "type": "invalid_request_error",
                                              "code": "invalid_api_key"}}))
        return False

    def do_GET(self) -> None:
        self.fake.requests.append({"path": self.path, "headers": dict(self.headers),
                                "body": None})
        if not self._authorised():
            return
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.fake.models]
            self._send(200, json.dumps({"object": "list", "data": data}))
        else:
            self._send(404, json.dumps({"error": {"message": "not found"}}))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode(errors="replace")}
        self.fake.requests.append({"path": self.path, "headers": dict(self.headers),
                                "body": body})
        if not self._authorised():
            return
        if self.path.endswith("/embeddings"):
            self._embeddings(body)
        elif self.path.endswith("/chat/completions"):
            self._chat(body)
        else:
            self._send(404, json.dumps({"error": {"message": "not found"}}))

    def _embeddings(self, body: dict) -> None:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        data = [{"object": "embedding", "index": i, "embedding": fake_embedding(t)}
                for i, t in enumerate(texts)]
        self._send(200, json.dumps({"object": "list", "data": data,
                                    "model": body.get("model"),
                                    "usage": {"prompt_tokens": 0, "total_tokens": 0}}))

    def _chat(self, body: dict) -> None:
        if body.get("model") not in self.fake.models:
            self._send(404, json.dumps({"error": {
                "message": f"The model `{body.get('model')}` does not exist",
                "code": "model_not_found"}}))
            return
        step = self.fake.next_step(body)
        if step.get("delay"):
            time.sleep(float(step["delay"]))
        if "status" in step:
            self._send(int(step["status"]), step.get("body", "{}"))
        elif "raw" in step:
            self._send(200, step["raw"])
        else:
            self._send(200, json.dumps(completion_body(step, body["model"],
                                                       len(self.fake.requests))))


def main() -> None:
    """Serve a JSON script file until interrupted: `python -m agent_cli.llm.fake_server FILE`."""
    import sys

    script = json.loads(open(sys.argv[1]).read()) if len(sys.argv) > 1 else []
    with FakeOpenAIServer(script) as srv:
        print(srv.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
