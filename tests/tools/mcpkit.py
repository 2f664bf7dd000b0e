"""The tests' MCP servers: the fixture server's command, an HTTP one on 127.0.0.1, pid checks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py"


def fixture_server(pid_file: Path, *extra: str, **keys: object) -> dict:
    """A `[mcp_servers.NAME]` table for the fixture server, writing its pid to `pid_file`."""
    return {
        "command": sys.executable,
        "args": [str(FIXTURE), "--pid-file", str(pid_file), *extra],
        **keys,
    }


def toml_table(name: str, table: dict) -> str:
    """`table` as TOML under `[mcp_servers.NAME]`."""
    import json

    lines = [f"[mcp_servers.{name}]"]
    for key, value in table.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def pids(pid_file: Path) -> list[int]:
    """Every pid the fixture servers wrote to `pid_file`."""
    if not pid_file.exists():
        return []
    return [int(line) for line in pid_file.read_text().split()]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def wait_gone(pid_list: list[int], timeout: float = 15) -> list[int]:
    """The pids still alive after `timeout` seconds."""
    end = time.monotonic() + timeout
    left = [p for p in pid_list if alive(p)]
    while left and time.monotonic() < end:
        time.sleep(0.1)
        left = [p for p in left if alive(p)]
    return left


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path):
    """Start the fixture server over streamable HTTP with a bearer token: (url, token)."""
    port, token = free_port(), "fixture-bearer-token-123"
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--http", str(port), "--token", token],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("AGENT_")},
    )
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp", token
    proc.kill()
    proc.wait(10)
