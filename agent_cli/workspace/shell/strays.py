"""Processes a killed agent left running: found by the mark in their environment, and stopped.

While the agent lives, nothing a command starts outlives the command (reaper.py). An agent
killed outright (SIGKILL, the OOM killer) cannot stop the command it was running: the command
runs in a session of its own and goes on, re-parented to init. So every command (and every
hook and stdio MCP server) gets `AGENT_COMMAND_OF=<pid>:<start time>` naming the agent
process that runs it, which its own children inherit; the next run looks for processes whose mark names an agent that is no longer
there (its pid gone, or reused by a process that started at another time) and kills them. A
mark naming a live agent (another run, in another worktree) is left alone, and so is a process
that changed its environment (its initial one is what /proc shows) or is another user's.
"""

from __future__ import annotations

import os
import signal
from functools import lru_cache

from agent_cli.workspace.shell import proctree

MARK = "AGENT_COMMAND_OF"
_PREFIX = f"{MARK}=".encode()


def _started(pid: int) -> str | None:
    """The start time of `pid` in clock ticks since boot (/proc/PID/stat field 22), or None."""
    return proctree.stat_field(pid, 19)


@lru_cache(maxsize=1)
def mark() -> str:
    """This process's mark: `<pid>:<start time>`."""
    pid = os.getpid()
    return f"{pid}:{_started(pid) or 0}"


def _owner_alive(value: str) -> bool:
    """Whether the agent a mark names still runs (the same process: same pid, same start)."""
    pid, _, started = value.partition(":")
    if not pid.isdigit():
        return True  # not a mark this code wrote: leave the process alone
    return _started(int(pid)) == started


def _marked(pid: int) -> str | None:
    """The mark in `pid`'s initial environment, or None (none, or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read(1 << 20)
    except OSError:
        return None
    for entry in env.split(b"\0"):
        if entry.startswith(_PREFIX):
            return entry[len(_PREFIX) :].decode("ascii", "replace")
    return None


def stop_strays() -> list[int]:
    """SIGKILL every process whose mark names an agent that is gone; the pids killed."""
    try:
        names = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    me, uid, killed = os.getpid(), os.getuid(), []
    for pid in names:
        if pid == me:
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        value = _marked(pid)
        if value is None or _owner_alive(value):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        killed.append(pid)
    return killed
