"""Run commands in the work tree: a timeout that kills the whole process group, capped output."""

from __future__ import annotations

import codecs
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from agent_cli.core.errors import ToolError, WorkspaceError
from agent_cli.workspace.shell import reaper, screen, strays

SANDBOXES = ("none", "bwrap")
# A command at its timeout is first interrupted as Ctrl-C would (SIGINT), and given this long to
# wind up: Python writes out what it still buffered (a pipe is block-buffered: SIGTERM would lose
# it) and pytest says which test it was in. What ignores SIGINT gets SIGTERM, then SIGKILL.
INT_GRACE_S = 2.0
TERM_GRACE_S = 2.0
# After the command exits, output from processes it left in the background is still read this long.
LINGER_S = 0.5
_READ_CHUNK = 65536
_POLL_S = 0.05


@dataclass
class CommandResult:
    """What a command did: exit code (None when killed at the timeout) and its capped output,
    which at a timeout is what it printed until it was stopped."""

    cmd: str | list[str]
    exit_code: int | None
    output: str
    timed_out: bool
    duration_s: float
    timeout_s: float = 0.0


def run_command(
    cmd: str | list[str],
    cwd: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    max_output_chars: int = 20000,
    sandbox: str = "none",
    writable: list[Path] | None = None,
    readonly: list[Path] | None = None,
) -> CommandResult:
    """Run `cmd` (a str through `bash -c`, a list without a shell) in `cwd` with a hard timeout.

    stdout and stderr are interleaved; stdin is /dev/null. `env` None means this process's
    environment with secrets removed. No process the command started survives it, not even
    one that left the process group (`setsid -f`): see `reaper`.
    With sandbox="bwrap" only `writable` (default: cwd) can be written and there is no network;
    `readonly` paths inside a writable one (.git, the state directory) stay read-only.
    """
    check_sandbox(sandbox)
    cwd = Path(cwd)
    if not cwd.is_dir():
        raise ToolError(f"working directory {cwd} does not exist")
    argv = _argv(cmd)
    if sandbox == "bwrap":
        argv = bwrap_argv(argv, cwd, writable or [cwd], readonly or [])
    env = scrub_env(dict(os.environ)) if env is None else env
    env = {**env, strays.MARK: strays.mark()}  # found again if this agent is killed (strays.py)
    spared = reaper.adopt_orphans()
    capture = _Capture(max_output_chars)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        reason = "command not found" if code == 127 else f"cannot run it ({exc.strerror})"
        took = time.monotonic() - start
        return CommandResult(cmd, code, f"{argv[0]}: {reason}", False, took, timeout_s)
    # The guard begins right after the command does: a Ctrl-C taken at any call between the
    # two would leave the command running in its own session.
    try:
        timed_out = _supervise(proc, capture, start + timeout_s, spared)
    except BaseException:
        stop_group(proc, grace_s=0.0)  # Ctrl-C does not reach a child in its own session
        raise
    finally:
        if proc.stdout is not None:  # stdout=PIPE
            proc.stdout.close()
        reaper.kill_leftovers(spared)
    exit_code = None if timed_out else proc.returncode
    took = time.monotonic() - start
    return CommandResult(cmd, exit_code, capture.text(), timed_out, took, timeout_s)


def _argv(cmd: str | list[str]) -> list[str]:
    if isinstance(cmd, str):
        if not cmd.strip():
            raise ToolError("the command is empty")
        return ["bash", "-c", cmd]
    argv = [str(part) for part in cmd]
    if not argv:
        raise ToolError("the command is empty")
    return argv


def _supervise(
    proc: subprocess.Popen[bytes], capture: _Capture, deadline: float, spared: set[int]
) -> bool:
    """Collect output until the command ends or the deadline; stop its group; True on timeout."""
    assert proc.stdout is not None  # stdout=PIPE
    fd = proc.stdout.fileno()
    eof = _pump(fd, capture, deadline, proc)
    if not eof and proc.poll() is not None:
        eof = _pump(fd, capture, time.monotonic() + LINGER_S)
    if proc.poll() is None:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    timed_out = proc.poll() is None
    if timed_out:
        eof = _interrupt(proc, fd, capture)
    stop_group(proc, grace_s=TERM_GRACE_S if proc.poll() is None else 0.0)
    reaper.kill_leftovers(spared)  # before waiting on output a daemon could hold open
    if not eof:
        _pump(fd, capture, time.monotonic() + 1.0)  # what the dying group still wrote
    capture.finish()
    return timed_out


def _interrupt(proc: subprocess.Popen[bytes], fd: int, capture: _Capture) -> bool:
    """SIGINT the command's group and read what it writes while it winds up, until it exits or
    INT_GRACE_S pass; True at end of file."""
    _signal_group(proc.pid, signal.SIGINT)
    return _pump(fd, capture, time.monotonic() + INT_GRACE_S, proc)


def _pump(
    fd: int, capture: _Capture, until: float, proc: subprocess.Popen[bytes] | None = None
) -> bool:
    """Read into `capture` until end of file (True), time `until`, or `proc` exiting (False)."""
    poller = select.poll()  # not select.select: it fails on descriptors numbered above 1023
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        left = until - time.monotonic()
        if left <= 0 or (proc is not None and proc.poll() is not None):
            return False
        if poller.poll(min(left, _POLL_S) * 1000):
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return True
            capture.feed(chunk)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the command's process group, then SIGKILL whatever is left after `grace_s`."""
    if grace_s > 0:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass  # stuck in the kernel; nothing more a signal can do


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Capture:
    """Decoded output as a terminal shows it (`screen`), keeping the first and last halves of
    `max_chars`, counting what is cut."""

    def __init__(self, max_chars: int) -> None:
        self.head_max = max_chars // 2
        self.tail_max = max_chars - self.head_max
        self.head: list[str] = []
        self.head_len = 0
        self.tail: deque[str] = deque()
        self.tail_len = 0
        self.total = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.screen = screen.Screen()

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of output."""
        self._add(self.screen.feed(self.decoder.decode(chunk)))

    def finish(self) -> None:
        """Flush a character split across the last chunk, and the line still being drawn."""
        self._add(self.screen.feed(self.decoder.decode(b"", final=True)) + self.screen.finish())

    def _add(self, text: str) -> None:
        self.total += len(text)
        if self.head_len < self.head_max:
            take = text[: self.head_max - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            text = text[len(take) :]
        if text:
            self.tail.append(text)
            self.tail_len += len(text)
            while self.tail and self.tail_len - len(self.tail[0]) >= self.tail_max:
                self.tail_len -= len(self.tail.popleft())

    def text(self) -> str:
        """The kept output, with a marker where the middle was cut."""
        head = "".join(self.head)
        tail = "".join(self.tail)[-self.tail_max :] if self.tail_max else ""
        cut = self.total - len(head) - len(tail)
        head, tail = screen.without_controls(head), screen.without_controls(tail)
        if cut <= 0:
            return head + tail
        return f"{head}\n[... {cut} characters cut ...]\n{tail}"


_ALWAYS_SECRET = {"OPENAI_API_KEY", "AGENT_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"}
_SECRET_NAME = re.compile(
    r"(^|_)API_?KEY$|(^|_)TOKEN$|SECRET|PASSWORD|PASSWD|PRIVATE_KEY", re.IGNORECASE
)


def scrub_env(env: dict[str, str], secrets: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """A copy of `env` without API keys, tokens, secrets, and variables holding a listed secret."""
    known = [s for s in secrets if s]
    return {name: value for name, value in env.items() if not _is_secret(name, value, known)}


def _is_secret(name: str, value: str, secrets: list[str]) -> bool:
    if name.upper() in _ALWAYS_SECRET or _SECRET_NAME.search(name):
        return True
    return any(value == s or (len(s) >= 8 and s in value) for s in secrets)


def check_sandbox(kind: str) -> None:
    """Raise WorkspaceError when `kind` is unknown or asks for a sandbox this machine cannot give."""
    if kind == "none":
        return
    if kind not in SANDBOXES:
        raise WorkspaceError(f"unknown sandbox {kind!r}", "set sandbox = none or sandbox = bwrap")
    binary = shutil.which("bwrap")
    if binary is None:
        raise WorkspaceError(
            "sandbox = bwrap was asked for but bubblewrap is not installed",
            "apt-get install bubblewrap, or set sandbox = none",
        )
    if not _bwrap_works(binary):
        raise WorkspaceError(
            "sandbox = bwrap was asked for but bubblewrap cannot create a sandbox here "
            "(user namespaces may be disabled)",
            "allow unprivileged user namespaces, or set sandbox = none",
        )


@lru_cache(maxsize=4)
def _bwrap_works(binary: str) -> bool:
    probe = [
        binary,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-net",
        "--unshare-pid",
        "true",
    ]
    try:
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _under_tmp(path: str) -> bool:
    return path == "/tmp" or path.startswith("/tmp/")


def bwrap_argv(
    argv: list[str], cwd: Path, writable: list[Path], readonly: Sequence[Path] = ()
) -> list[str]:
    """`argv` wrapped in bubblewrap: everything read-only but `writable`, a private /tmp, no network."""
    # /tmp is mounted before the writable binds so that a repository under /tmp stays visible.
    wrapped = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    for prefix in _python_under_tmp():
        wrapped += ["--ro-bind", prefix, prefix]
    for path in writable:
        wrapped += ["--bind", str(path), str(path)]
    # Mounted over the writable binds: git's hooks and config, and the agent's state, are run or
    # read later outside the sandbox, so a sandboxed command must not be able to change them.
    for path in readonly:
        if os.path.exists(path):
            wrapped += ["--ro-bind", str(path), str(path)]
    wrapped += ["--unshare-net", "--unshare-pid", "--die-with-parent", "--chdir", str(cwd), "--"]
    return wrapped + argv


def bwrap_hides(path: Path, writable: Sequence[Path], readonly: Sequence[Path] = ()) -> bool:
    """Whether `path` is out of sight in `bwrap_argv`'s sandbox: where it leads (links followed)
    is under the sandbox's private /tmp, in none of the directories bound into it."""
    real = os.path.realpath(path)
    if not _under_tmp(real):
        return False
    binds = [*_python_under_tmp(), *(os.path.realpath(p) for p in (*writable, *readonly))]
    return not any(real == b or real.startswith(b.rstrip("/") + "/") for b in binds)


def _python_under_tmp() -> list[str]:
    """The Python running the agent where it lives under /tmp (a virtual environment, as CI
    makes one): bound read-only into the sandbox, so hooks, MCP servers and commands that
    name it still find it."""
    prefixes = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)})
    return [p for p in prefixes if _under_tmp(p) and os.path.isdir(p)]
