"""Run one hook's command: JSON on stdin, stdout and stderr apart and bounded, a hard timeout.

The command runs like the model's commands: the scrubbed environment, the repository root as
its working directory, under bubblewrap when the run is sandboxed, in its own process group
that is killed at the timeout, and no process it started outlives it (`shell.reaper`).
In the sandbox its program is looked for first (`program`), and how it ended is said as
without the sandbox: bubblewrap's own exits for a hook it could not start, or one killed by a
signal, are turned back into what they mean.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent_cli.tools.hooks.program import cannot_start
from agent_cli.workspace.shell import reaper, strays
from agent_cli.workspace.shell.runner import bwrap_argv, stop_group

MAX_STREAM_BYTES = 16_000  # what is kept of each of stdout and stderr (head and tail)
TERM_GRACE_S = 1.0
LINGER_S = 0.5  # output read after the hook exits, from what it left running
_READ_CHUNK = 65536
SIGNAL_MAX = max(signal.valid_signals())  # bubblewrap exits 128+N for a hook killed by N


@dataclass(frozen=True)
class HookPlace:
    """Where and how hooks run: the model's commands' root, environment and sandbox."""

    root: Path
    env: dict[str, str]
    sandbox: str = "none"
    readonly: tuple[Path, ...] = ()  # read-only inside the sandbox (.git, the state directory)
    secrets: tuple[str, ...] = ()  # redacted from what a hook writes


@dataclass(frozen=True)
class Finished:
    """How the hook's process ended: its exit code (None when killed at the timeout), output."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


@dataclass
class _Bounded:
    """The first and last halves of `limit` bytes of a stream, the cut said."""

    limit: int = MAX_STREAM_BYTES
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - self.limit // 2)]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[... {cut} bytes cut ...]\n{tail}" if cut > 0 else head + tail


def run_hook(argv: list[str], stdin: bytes, place: HookPlace, timeout_s: float) -> Finished:
    """Run `argv` in `place` with `stdin` as its input, to its end or its timeout."""
    if place.sandbox != "bwrap":
        return _run(argv, stdin, place, timeout_s)
    cannot = cannot_start(argv[0], place.root, place.env, place.sandbox, place.readonly)
    if cannot is not None:  # bubblewrap would only say that execvp failed
        return Finished(cannot.exit_code, "", f"{argv[0]}: {cannot.why}", False, 0.0)
    wrapped = bwrap_argv(argv, place.root, [place.root], list(place.readonly))
    return _unwrapped(argv[0], _run(wrapped, stdin, place, timeout_s))


def _unwrapped(program: str, ran: Finished) -> Finished:
    """How the hook ended, said as it is without the sandbox: bubblewrap exits 1 with
    `bwrap: ...` on stderr when it could not start the hook (`execvp` failed, or the sandbox
    could not be made: 127 or 126, as a hook that fails to start is given), and 128+N when the
    hook was killed by signal N (-N, as for a process of our own; a hook that exits 128+N
    itself looks the same and is taken as killed)."""
    code, said = ran.exit_code, ran.stderr.strip()
    if code == 1 and said.startswith("bwrap: ") and "\n" not in said:
        why = said.rpartition(": ")[2] if said.startswith("bwrap: execvp ") else said
        if why == os.strerror(errno.ENOENT):
            return replace(ran, exit_code=127, stderr=f"{program}: command not found")
        return replace(ran, exit_code=126, stderr=f"{program}: cannot run it ({why})")
    if code is not None and 128 < code <= 128 + SIGNAL_MAX:
        return replace(ran, exit_code=128 - code)
    return ran


def _run(argv: list[str], stdin: bytes, place: HookPlace, timeout_s: float) -> Finished:
    """Start `argv` (the hook, or bubblewrap with the hook) and see it to its end or timeout."""
    spared = reaper.adopt_orphans()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=place.root,
            env={**place.env, strays.MARK: strays.mark()},  # stopped if this agent is killed
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (OSError, ValueError) as e:  # ValueError: a NUL the settings let through
        code = 127 if isinstance(e, FileNotFoundError) else 126
        why = "command not found" if code == 127 else f"cannot run it ({_why(e)})"
        return Finished(code, "", f"{argv[0]}: {why}", False, time.monotonic() - start)
    feeder = threading.Thread(target=_feed, args=(proc, stdin), daemon=True, name="hook-stdin")
    feeder.start()
    out, err = _Bounded(), _Bounded()
    try:
        timed_out = _collect(proc, out, err, start + timeout_s)
    except BaseException:
        stop_group(proc, 0.0)
        raise
    finally:
        stop_group(proc, 0.0)  # what the hook left running in its group goes with it
        reaper.kill_leftovers(spared)
        feeder.join(timeout=1.0)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    exit_code = None if timed_out else proc.returncode
    return Finished(exit_code, out.text(), err.text(), timed_out, time.monotonic() - start)


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write the hook's input and close it; a hook that does not read it is no error."""
    assert proc.stdin is not None  # stdin=PIPE
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    try:
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _collect(proc: subprocess.Popen[bytes], out: _Bounded, err: _Bounded, deadline: float) -> bool:
    """Read both streams until they close and the process ends, or the deadline; True on timeout."""
    assert proc.stdout is not None and proc.stderr is not None  # both PIPE
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    poller = select.poll()
    for fd in streams:
        poller.register(fd, select.POLLIN | select.POLLHUP)
    ended: float | None = None
    while streams:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            break
        if proc.poll() is not None:
            # a process the hook left in the background may hold its pipes open
            ended = ended or now
            if now - ended > LINGER_S:
                break
        for fd, _ in poller.poll(min(left, 0.1) * 1000):
            chunk = os.read(fd, _READ_CHUNK)
            if chunk:
                streams[fd].feed(chunk)
            else:
                poller.unregister(fd)
                del streams[fd]
    if not streams:  # both closed: the hook is ending
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        stop_group(proc, TERM_GRACE_S)
        return True
    return False


def _why(e: OSError | ValueError) -> str:
    return (e.strerror if isinstance(e, OSError) else None) or str(e)
