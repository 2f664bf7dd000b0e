"""The repository's own files that the user's commands run (hooks, stdio MCP servers), held to
what they were when the run began.

A hook such as `python scripts/guard.py` runs a file the model can change: with its file
tools, or with any command the policy lets through (`python -c "open(...)"`). A guard the
model rewrote would then run the model's code as the user's hook, outside the command policy;
so would a server the model rewrote before a run stopped, started again when it resumes.
So each word of such a command that names a file inside the repository (a word of a shell
line in it too: `sh -c "python scripts/guard.py"`, and the files `python -m scripts.guard`
runs) is read when the hooks are set up (its git blob id), and before each run of the hook it
is read again: a file that changed, is gone, or (for `-m`) appeared keeps the hook from
running. A resumed run holds them to what they were when the run first began (`Started`). At
`pre_tool` and `task_verified` that blocks (a guard that cannot be trusted fails closed);
elsewhere it is a notice.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

MAX_SCRIPT_BYTES = 16 * 1024 * 1024  # a larger file is not a script: it is not held
# A resumed run's commands are held to the files as the run found them when it began, which the
# model may have changed in an earlier session: the blob id a repository path had in the
# commit the run started from (None: it had no such file there; it is then read as it is now).
Started = Callable[[str], str | None]


class HeldFiles:
    """The files inside `root` that `commands` name, and their digests when this was made."""

    def __init__(
        self, root: Path, commands: Iterable[Sequence[str]], started: Started | None = None
    ) -> None:
        self.root = root.resolve()
        self._files: dict[tuple[str, ...], list[Path]] = {}  # by command
        self._digests: dict[Path, str | None] = {}
        for command in commands:
            named = self._files.setdefault(tuple(command), self._named(command))
            for path in named:
                held = started(path.relative_to(self.root).as_posix()) if started else None
                self._digests.setdefault(path, held or _digest(path))

    def changed(self, command: Sequence[str]) -> list[str]:
        """The files `command` named when this was made that are not what they were then
        (gone, or changed), relative to the root."""
        return [
            path.relative_to(self.root).as_posix()
            for path in self._files.get(tuple(command), [])
            if _digest(path) != self._digests[path]
        ]

    def files(self) -> list[str]:
        """Every file held that is there, relative to the root, in the commands' order."""
        found = [path for paths in self._files.values() for path in paths if path.exists()]
        return list(dict.fromkeys(path.relative_to(self.root).as_posix() for path in found))

    def _named(self, command: Sequence[str]) -> list[Path]:
        """The regular files inside the root that the command's words name, those of a shell
        line it holds among them (`sh -c "python scripts/guard.py"`), an option's value
        (`--config=scripts/rules.toml`), and the files `-m` would run, there or not (a
        package's `__init__.py` the model adds runs too)."""
        found: list[Path] = []
        words = _words(command)
        modules = _modules(words)
        for word in [*words, *modules]:
            if not word or word.startswith("-"):
                continue
            try:
                named = Path(os.path.normpath(self.root / word))  # an absolute word stays itself
                # the path as written, a link kept (the model may replace a link to a guard
                # outside the repository), and the file it leads to
                for path in (named, named.resolve()):
                    inside = path != self.root and self.root in path.parents
                    held = path.is_file() and path.stat().st_size <= MAX_SCRIPT_BYTES
                    absent = word in modules and not path.exists()
                    if inside and (held or absent) and path not in found:
                        found.append(path)
            except (OSError, ValueError):
                continue
        return found


def _words(command: Sequence[str]) -> list[str]:
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


MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _modules(words: list[str]) -> list[str]:
    """The files `python -m NAME` runs for each module `-m` names: the module, or the
    package's `__main__.py`, and the `__init__.py` of each package on the way."""
    found = []
    for flag, name in zip(words, words[1:], strict=False):
        if flag == "-m" and MODULE.fullmatch(name):
            parts = name.split(".")
            found += [f"{'/'.join(parts)}.py", f"{'/'.join(parts)}/__main__.py"]
            found += [f"{'/'.join(parts[:n])}/__init__.py" for n in range(1, len(parts) + 1)]
    return found


def _digest(path: Path) -> str | None:
    """The file's git blob id (what `Started` gives for it), None when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
