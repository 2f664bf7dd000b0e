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

    def start(self, timeout_s: float = 30.0) -> "ChromaProcess":
        """Start the server and return once its heartbeat answers."""
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [self.executable, "run", "--path", str(self.path), "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma run exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            if self.alive():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"chroma run did not answer within {timeout_s}s: {self.log.read_text()[-2000:]}")

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
