"""No process a command starts outlives it: the agent adopts orphans and kills what is left.

A daemon (`setsid -f sh -c 'sleep 12; echo TAMPERED > done.txt'`) leaves the command's
process group and session, so killing the group misses it, and it could change a file after
the harness verified and committed it. The agent makes itself a child subreaper
(`PR_SET_CHILD_SUBREAPER`), so such a process is re-parented to the agent instead of to init
and stays findable as a descendant; after each command every descendant that was not there
before is killed and reaped.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Set as AbstractSet
from functools import lru_cache

from agent_cli.workspace.shell import proctree

_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 20


@lru_cache(maxsize=1)
def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False  # not Linux: process groups are all there is


def adopt_orphans() -> set[int]:
    """Become a subreaper; return the descendants that exist now (they are not the command's)."""
    _become_subreaper()
    return descendants(os.getpid())


def kill_leftovers(spared: set[int]) -> int:
    """SIGKILL and reap every descendant not in `spared` (nor under one); how many were killed."""
    killed: set[int] = set()
    ended: set[int] = set()
    for _ in range(_ROUNDS):
        doomed, ended = _freeze(spared, killed)
        if not doomed:
            break
        killed |= _send(doomed, signal.SIGKILL)
        _reap(killed)
    _wait_ended(killed)
    # with nothing killed, the last look (which found nothing new) saw every adopted orphan
    # that had ended; after a kill, look again
    _reap(killed | (_look(spared)[1] if killed else ended))
    return len(killed)


def kill_other_sessions(spared: set[int]) -> int:
    """`kill_leftovers`, sparing too every descendant in this process's own session: what is
    killed is what a server started in a session of its own left behind when it ended (its
    children, and daemons it detached), not the agent's own helpers (git processes)."""
    own = os.getsid(0)
    ours = {pid for pid in descendants(os.getpid(), skip=spared) if _session(pid) == own}
    return kill_leftovers(spared | ours)


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _freeze(spared: set[int], killed: set[int]) -> tuple[set[int], set[int]]:
    """SIGSTOP every descendant not spared nor already killed, until no new one appears; the
    stopped ones, and the adopted orphans that had ended (zombies) at the last look.

    Killed one by one, a parent could outlive its killed child long enough to go on with its
    script (`sleep 1; touch x`: the sleep dies, the shell runs touch); stopped, none can act.
    """
    frozen: set[int] = set()
    ended: set[int] = set()
    for _ in range(_ROUNDS):
        live, ended = _look(spared)
        new = live - killed - frozen
        if not new:
            break
        frozen |= _send(new, signal.SIGSTOP)
    return frozen, ended


def _send(pids: set[int], sig: int) -> set[int]:
    """Send `sig` to each process; the ones it reached (gone or not ours: left out)."""
    reached = set()
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue
        reached.add(pid)
    return reached


def _wait_ended(pids: set[int], timeout_s: float = 5.0) -> None:
    """Wait until each of `pids` has really ended: SIGKILL is only delivered, not yet carried
    out, when kill() returns, and on a loaded machine a killed process stays alive a while."""
    deadline = time.monotonic() + timeout_s
    left = set(pids)
    while left and time.monotonic() < deadline:
        _reap(left)
        left = {pid for pid in left if _alive(pid)}
        if left:
            time.sleep(0.005)


def _alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    return proctree.state_of(pid) not in (None, "Z")


def _look(spared: set[int]) -> tuple[set[int], set[int]]:
    """One read of the tree below this process, leaving out `spared`: the live descendants,
    and the adopted orphans that already ended on their own and wait to be reaped."""
    me = os.getpid()
    below = list(proctree.below(me, spared))
    live = {pid for pid, _, state in below if state != "Z"}
    ended = {pid for pid, ppid, state in below if ppid == me and state == "Z"}
    return live, ended


def _reap(pids: set[int]) -> None:
    """Collect the exit status of those of `pids` that are (now) this process's children."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def descendants(root: int, skip: AbstractSet[int] = frozenset()) -> set[int]:
    """Every live process below `root`, leaving out `skip` and everything below those."""
    return {pid for pid, _, state in proctree.below(root, skip) if state != "Z"}
