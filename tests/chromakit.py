"""A real Chroma server (`chroma run`) on a free loopback port, for the shared-memory tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit


def chroma_executable() -> str | None:
    """The `chroma` command installed next to this Python, else the one on PATH, else None."""
    beside = Path(sys.executable).parent / "chroma"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("chroma")


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChromaProcess:
    """`chroma run --path DIR --port PORT` as a child process; `url` once started."""

    def __init__(self, executable: str, path: Path) -> None:
        self.executable, self.path = executable, path
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self.log = path.parent / f"{path.name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30.0) -> ChromaProcess:
        """Start the server and return once its heartbeat answers."""
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [self.executable, "run", "--path", str(self.path), "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chroma run exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                )
            if self.alive():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"chroma run did not answer within {timeout_s}s: {self.log.read_text()[-2000:]}"
        )

    def alive(self) -> bool:
        """Whether the heartbeat answers."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as reply:
                return reply.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (and wait for it)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class TokenProxy:
    """A loopback reverse proxy in front of a Chroma server that lets through only requests
    carrying `Authorization: Bearer TOKEN`, as a team might deploy one; records what it saw."""

    def __init__(self, upstream: str, token: str) -> None:
        import http.server
        import threading

        self.upstream, self.token = urlsplit(upstream), token
        self.seen: list[tuple[str, str, str | None]] = []  # (method, path, Authorization)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> TokenProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handle(self, request) -> None:
        import http.client

        auth = request.headers.get("Authorization")
        self.seen.append((request.command, request.path, auth))
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        if auth != f"Bearer {self.token}":
            status, kind = 401, "application/json"
            data = b'{"error":"Unauthorized","message":"bad token"}'
        else:
            conn = http.client.HTTPConnection(
                self.upstream.hostname, self.upstream.port, timeout=30
            )
            headers = {
                k: v for k, v in request.headers.items() if k.lower() not in ("host", "connection")
            }
            conn.request(request.command, request.path, body=body or None, headers=headers)
            reply = conn.getresponse()
            status, data = reply.status, reply.read()
            kind = reply.getheader("Content-Type", "application/json")
            conn.close()
        request.send_response(status)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)
