"""The repository's own files that hook commands run, held to what they were when the run began.

A hook such as `python scripts/guard.py` runs a file the model can change: with its file
tools, or with any command the policy lets through (`python -c "open(...)"`). A guard the
model rewrote would then run the model's code as the user's hook, outside the command policy.
So each word of a hook's command that names a file inside the repository (a word of a shell
line in it too: `sh -c "python scripts/guard.py"`) is read when the
hooks are set up (its SHA-256), and before each run of the hook it is read again: a file
that changed, or is gone, keeps the hook from running. At `pre_tool` and `task_verified`
that blocks (a guard that cannot be trusted fails closed); elsewhere it is a notice.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Iterable
from pathlib import Path

from agent_cli.tools.hooks.config import HookSpec

MAX_SCRIPT_BYTES = 16 * 1024 * 1024  # a larger file is not a script: it is not held


class HookScripts:
    """The files inside `root` that `specs` name, and their digests when this was made."""

    def __init__(self, root: Path, specs: Iterable[HookSpec]) -> None:
        self.root = root.resolve()
        self._files: dict[tuple[str, ...], list[Path]] = {}  # by command
        self._digests: dict[Path, str | None] = {}
        for spec in specs:
            named = self._files.setdefault(tuple(spec.command), self._named(spec))
            for path in named:
                self._digests.setdefault(path, _digest(path))

    def changed(self, spec: HookSpec) -> list[str]:
        """The files `spec` named when this was made that are not what they were then (gone,
        or changed), relative to the root."""
        return [
            path.relative_to(self.root).as_posix()
            for path in self._files.get(tuple(spec.command), [])
            if _digest(path) != self._digests[path]
        ]

    def _named(self, spec: HookSpec) -> list[Path]:
        """The regular files inside the root that the command's words name, those of a shell
        line it holds among them (`sh -c "python scripts/guard.py"`), and an option's value
        (`--config=scripts/rules.toml`)."""
        found: list[Path] = []
        for word in _words(spec.command):
            if not word or word.startswith("-"):
                continue
            try:
                named = Path(os.path.normpath(self.root / word))  # an absolute word stays itself
                # the path as written, a link kept (the model may replace a link to a guard
                # outside the repository), and the file it leads to
                for path in (named, named.resolve()):
                    inside = path != self.root and self.root in path.parents
                    if inside and path.is_file() and path.stat().st_size <= MAX_SCRIPT_BYTES:
                        found += [] if path in found else [path]
            except (OSError, ValueError):
                continue
        return found


def _words(command: list[str]) -> list[str]:
    """Each word of `command`, then the words of any that holds a shell line (split as the
    shell would, else at spaces), and the value of each `--option=value`."""
    words = list(command)
    for word in command:
        if any(c.isspace() for c in word):
            try:
                words += shlex.split(word)
            except ValueError:  # an unclosed quote
                words += word.split()
    return words + [w.split("=", 1)[1] for w in words if "=" in w]


def _digest(path: Path) -> str | None:
    """The file's SHA-256, None when it cannot be read (gone, say)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
