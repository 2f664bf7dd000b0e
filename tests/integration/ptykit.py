"""`agent` on a real pseudo-terminal: the child's stdin, stdout and stderr are the pty, and the
test types into it as a person would (Ctrl-C included: the line discipline turns it into SIGINT)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

import pytest

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")


class PtyAgent:
    """`python -m agent_cli ARGS` started on a new pty, as its controlling terminal."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is already its stdin/stdout/stderr and terminal
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, "-m", "agent_cli", *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd, self.buffer, self.code = pid, fd, "", None

    @property
    def text(self) -> str:
        """Everything the child wrote so far, without colour codes and carriage returns."""
        return ANSI.sub("", self.buffer).replace("\r", "")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.buffer += data.decode(errors="replace")
        return bool(data)

    def expect(self, needle: str, timeout: float = 60, count: int = 1) -> None:
        """Wait until `needle` has been written (`count` times); fail with what was seen."""
        end = time.monotonic() + timeout
        while self.text.count(needle) < count:
            if time.monotonic() > end or not self._read(0.1):
                if self.text.count(needle) < count:
                    pytest.fail(f"{needle!r} never appeared; the terminal showed:\n{self.text}")

    def type(self, text: str) -> None:
        """Type `text` as keys (a line ends with "\\n"; "\\x03" is Ctrl-C)."""
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 60) -> int:
        """Read until the child exits; its exit code."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            self._read(0.05)
            if done:
                while self._read(0.05) and self.buffer:
                    if not select.select([self.fd], [], [], 0)[0]:
                        break
                self.code = os.waitstatus_to_exitcode(status)
                return self.code
        self.dump_stacks()
        self.kill()
        pytest.fail(f"the agent did not exit within {timeout}s; it showed:\n{self.text}")

    def hang_up(self, timeout: float = 60) -> int:
        """Close the terminal, as closing its window does (the kernel sends SIGHUP to the child,
        whose reads and writes on it fail from then on); the child's exit code."""
        os.close(self.fd)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.code = os.waitstatus_to_exitcode(status)
                return self.code
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"the agent did not exit within {timeout}s of its terminal closing")

    def dump_stacks(self) -> None:
        """Make a hung child print where each of its threads is (PYTHONFAULTHANDLER dumps
        them on SIGABRT), so that a failure shows where it hung."""
        try:
            os.kill(self.pid, signal.SIGABRT)
        except ProcessLookupError:
            return
        end = time.monotonic() + 5
        while time.monotonic() < end and self._read(0.1):
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                self.code = -1
                break

    def kill(self) -> None:
        if self.code is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass


@pytest.fixture
def pty_agent(agent_env):
    """Start `agent ARGS` on a pty; every child is killed at the end of the test."""
    started: list[PtyAgent] = []

    def start(*args: str, cwd: Path, env: dict | None = None) -> PtyAgent:
        # a hung child dumps its threads' stacks when `wait` gives up on it
        agent = PtyAgent(list(args), cwd, {**agent_env, "PYTHONFAULTHANDLER": "1", **(env or {})})
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.kill()
