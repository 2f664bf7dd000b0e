"""The processes below one process, read from /proc: by following each process's `children`
files where the kernel has them, by reading every process's `stat` where it does not.

The reaper reads it twice around each command the harness runs, git's included, when nothing
is left over (bench/proctree.py). Reading every process's `stat` costs a file per process on
the machine (milliseconds on a desktop with a few hundred processes, more on a busy one);
following `children` costs a file per process below the agent and per thread of each,
usually a handful.

The kernel says its `children` list may skip a child while a sibling exits during the read
(Documentation/filesystems/proc.rst). A process missed when the reaper takes its list of
processes to spare would be killed later as a leftover, so a list is read until two reads
agree, and the union of every read is the answer: a child is missed only if it is skipped in
every read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from functools import lru_cache

_READS = 5


def below(root: int, skip: AbstractSet[int] = frozenset()) -> Iterator[tuple[int, int, str]]:
    """(pid, parent pid, state letter) of every process below `root`, zombies included,
    leaving out `skip` and everything below those."""
    return below_by_children(root, skip) if children_listed() else below_by_scan(root, skip)


@lru_cache(maxsize=1)
def children_listed() -> bool:
    """Whether this kernel lists a task's children (CONFIG_PROC_CHILDREN)."""
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")


def below_by_children(
    root: int, skip: AbstractSet[int] = frozenset()
) -> Iterator[tuple[int, int, str]]:
    """`below`, following the `children` file of each thread of each process."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        parent = stack.pop()
        for child in sorted(_children(parent)):
            if child in skip or child in seen:
                continue
            state = state_of(child)
            if state is None:
                continue  # ended and reaped since it was listed
            seen.add(child)
            yield child, parent, state
            stack.append(child)


def below_by_scan(
    root: int, skip: AbstractSet[int] = frozenset()
) -> Iterator[tuple[int, int, str]]:
    """`below`, reading the `stat` file of every process on the machine."""
    children: dict[int, list[tuple[int, str]]] = {}
    for pid, ppid, state in _processes():
        children.setdefault(ppid, []).append((pid, state))
    seen: set[int] = set()
    stack = [root]
    while stack:
        parent = stack.pop()
        for child, state in children.get(parent, []):
            if child not in skip and child not in seen:
                seen.add(child)
                yield child, parent, state
                stack.append(child)


def state_of(pid: int) -> str | None:
    """The state letter of `pid` (`Z` for a zombie), None when there is no such process."""
    return stat_field(pid, 0)


def stat_field(pid: int, index: int) -> str | None:
    """Field `index` of /proc/PID/stat counted from the one after the command's name (0: the
    state, 1: the parent's pid, 19: the start time), None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[index].decode()
    except (OSError, IndexError):
        return None


def _children(pid: int) -> set[int]:
    """The children of every thread of `pid`, read until two reads agree (see above)."""
    found: set[int] = set()
    last: set[int] | None = None
    for _ in range(_READS):
        now = _children_once(pid)
        found |= now
        if now == last:
            break
        last = now
    return found


def _children_once(pid: int) -> set[int]:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return set()  # ended
    found: set[int] = set()
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.update(int(word) for word in f.read().split())
        except OSError:
            continue  # the thread ended
    return found


def _processes() -> Iterator[tuple[int, int, str]]:
    """(pid, parent pid, state) of every process, read from /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        yield int(name), int(fields[1]), fields[0].decode()
