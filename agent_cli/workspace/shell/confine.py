"""What every command (the model's and an acceptance check) runs inside, sandbox or not.

Two guards that hold without bubblewrap, where the deny list alone would be a pattern check:
every push URL git would use is rewritten to a scheme no helper serves (the user's remotes
are out of reach of `git push` however it is spelled: `python3 -c`, an alias, a script), and
the state directory is compared before and after the command: a command that removed,
changed or added something there (`find .agent -delete`, `python3 -c "open('.agent/x', 'w')"`)
stops what called it with StateDirDamaged.
Under `sandbox = bwrap` the state directory is also mounted read-only and there is no network.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_cli.core.errors import WorkspaceError
from agent_cli.core.text import some

NO_PUSH = ("url.agent-never-pushes://.pushInsteadOf", "")  # an empty prefix matches every URL
MAX_ENTRIES = 50_000
# Files SQLite and atomic saves create and remove on their own.
_TRANSIENT = ("-journal", "-wal", "-shm", ".lock", ".tmp")
_WRITTEN_IN_PLACE = "chroma"  # the vector store's own files change size as it works

Snapshot = dict[str, tuple[int, int, int, int]]  # relative path: (mode, inode, size, mtime_ns)


class StateDirDamaged(WorkspaceError):
    """A command removed or changed files in the agent's state directory."""


def command_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with git's push URLs all rewritten to one that cannot be pushed to."""
    out = dict(env)
    count = out.get("GIT_CONFIG_COUNT", "0")
    n = int(count) if count.isdigit() else 0
    out[f"GIT_CONFIG_KEY_{n}"], out[f"GIT_CONFIG_VALUE_{n}"] = NO_PUSH
    out["GIT_CONFIG_COUNT"] = str(n + 1)
    return out


def snapshot(roots: list[Path]) -> dict[Path, Snapshot]:
    """Every entry under each root (links not followed), at most MAX_ENTRIES per root."""
    return {root: _walk(root) for root in roots}


def _walk(root: Path) -> Snapshot:
    found: Snapshot = {}
    stack = [root]
    while stack and len(found) < MAX_ENTRIES:
        where = stack.pop()
        try:
            with os.scandir(where) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            if entry.name.endswith(_TRANSIENT) or entry.name.startswith("."):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(entry.path, root)
            if rel in _OTHER_RUNS_TREES:
                continue  # runs at once work there: a worktree run's commands among them
            if _in_place(rel) and rel not in _STORE_FILES:
                continue  # other runs' writes replace the snapshot and the index's segments
            if _shared(rel):  # replaced and appended to by other runs: only removal counts
                found[rel] = (st.st_mode, 0, 0, 0)
            else:
                flat = _in_place(rel) or entry.is_dir(follow_symlinks=False)
                found[rel] = (
                    st.st_mode,
                    st.st_ino,
                    0 if flat else st.st_size,
                    0 if flat else st.st_mtime_ns,
                )
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    return found


def _in_place(rel: str) -> bool:
    return rel.split(os.sep, 1)[0] == _WRITTEN_IN_PLACE


def _shared(rel: str) -> bool:
    """Whether other runs at once write `rel` (their state and journals, the outbox): only
    its removal counts."""
    top = rel.split(os.sep, 1)[0]
    return top == "runs" or top.startswith("memory-outbox")


_OTHER_RUNS_TREES = ("worktrees", "batches")
_STORE_FILES = (
    "chroma",
    os.path.join("chroma", "chroma.sqlite3"),
)  # written in place, never replaced


def damage(before: dict[Path, Snapshot], after: dict[Path, Snapshot]) -> list[str]:
    """The paths a command removed, changed or added (outside the vector store), each under
    its root."""
    hurt = []
    for root, seen in before.items():
        now = after.get(root, {})
        if seen and not os.path.isdir(root):
            return [str(root)]
        hurt += [str(root / rel) for rel, what in seen.items() if now.get(rel) != what]
        added = now.keys() - seen.keys()
        hurt += [str(root / rel) for rel in added if not (_in_place(rel) or _shared(rel))]
    return sorted(hurt)


def check_intact(before: dict[Path, Snapshot], cmd: str | list[str]) -> None:
    """Raise StateDirDamaged when the command changed what `before` recorded."""
    hurt = damage(before, snapshot(list(before)))
    if not hurt:
        return
    shown = " ".join(cmd) if isinstance(cmd, list) else cmd
    raise StateDirDamaged(
        f"the command `{shown[:200]}` removed or changed files in the agent's state directory "
        f"({some(hurt, 3)}); nothing it checked can be trusted",
        "restore the state directory (or start a new run), and use sandbox = bwrap, "
        "which mounts it read-only",
    )
