"""The repository's own files that the user's commands run (hooks, stdio MCP servers), held to
what they were when the run began.

A hook such as `python scripts/guard.py` runs a file the model can change: with its file
tools, or with any command the policy lets through (`python -c "open(...)"`). A guard the
model rewrote would then run the model's code as the user's hook, outside the command policy;
so would a server the model rewrote before a run stopped, started again when it resumes.
So each word of such a command that names a path inside the repository (a word of a shell
line in it too: `sh -c "python scripts/guard.py"`, an option's value, and the files `python
-m scripts.guard` runs) is read when the hooks are set up (its git blob id, or that there is
no file there), and before each run of the hook it is read again: a file that changed, is
gone, or appeared keeps the hook from running. A command that runs Python is held to what it
imports from the repository as well (`pyreads`): the module directory Python puts first on
`sys.path` must not gain or lose an importable entry (`scripts/json.py` would run in place of
the standard library's `json`), and the modules its `import` statements load from there are
held as the script is. At `pre_tool` and `task_verified` that blocks (a guard that cannot be
trusted fails closed); elsewhere it is a notice.

A word the command line itself calls a credential, as `agent doctor` masks it (`redact_argv`:
the word after `--token`, the value of `--api-key=VALUE` or `SLACK_TOKEN=VALUE`, a word of a
key's shape; in a shell line it holds too, and that line as a word) names no file: it is
never held, so no path saved with the run holds it.

What each held path was is its state: a file's blob id (`GONE` for no file), or for a module
directory (a key ending in `/`; the root's is `./`) its importable entries, one a line. A
resumed run holds them to what they were when the run first began (`Started`): the states
saved with the run then (`digests`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from agent_cli.core.redact import argv_secrets, redact, redact_argv
from agent_cli.tools.pyreads import entries, python_reads

MAX_SCRIPT_BYTES = 16 * 1024 * 1024  # a larger file is not a script: it is not held
GONE = ""  # the state of a path that holds no file (nothing there, a directory, unreadable)
OTHER = "not a regular file"  # the state of a FIFO, a device or a socket
LARGE = "too large"  # the state of a file past MAX_SCRIPT_BYTES that was once a script
# A resumed run's commands are held to the files as the run found them when it first began,
# which the model may have changed in an earlier session: the state of a held path then (what
# `HeldFiles.digests` gave and the run saved), else the blob id the path had in the commit the
# run began at; None when neither is known (the path is then read as it is now).
Started = Callable[[str], str | None]


class HeldFiles:
    """The paths inside `root` that `commands` run or read, and their states when this was made
    (or, given `started`, when the run first began)."""

    def __init__(
        self, root: Path, commands: Iterable[Sequence[str]], started: Started | None = None
    ) -> None:
        self.root = root.resolve()
        self._keys: dict[tuple[str, ...], list[str]] = {}  # by command
        self._held: dict[str, str] = {}
        for command in commands:
            if tuple(command) not in self._keys:
                self._keys[tuple(command)] = self._named(command)
            for key in self._keys[tuple(command)]:
                if key not in self._held:
                    was = started(key) if started else None
                    self._held[key] = self._state(key) if was is None else was

    def changed(self, command: Sequence[str]) -> list[str]:
        """The paths `command` was held to that are not what they were (a file gone, changed or
        appeared; an importable entry of a module directory that appeared or is gone),
        relative to the root."""
        found: list[str] = []
        for key in self._keys.get(tuple(command), []):
            now, was = self._state(key), self._held[key]
            if now == was:
                continue
            if not key.endswith("/"):
                found.append(key)
                continue
            where = "" if key == "./" else key
            differ = set(now.splitlines()) ^ set(was.splitlines())
            found += [f"{where}{entry}" for entry in sorted(differ)] or [key]
        return list(dict.fromkeys(found))

    def clear_bytecode(self, command: Sequence[str]) -> None:
        """Delete the bytecode Python would load in place of the held modules' sources
        (`__pycache__/NAME.*.pyc` beside each held `.py` file; a `__pycache__` that is a link,
        the link): Python loads a `.pyc` whose header matches its source's size and time
        without reading the source, which the model can write one to match. Python writes
        them again from the sources, which are held."""
        for key in self._keys.get(tuple(command), []):
            if not key.endswith(".py"):
                continue
            source = self.root / key
            cache = source.parent / "__pycache__"
            try:
                if cache.is_symlink():
                    cache.unlink()
                    continue
                names = os.listdir(cache)
            except OSError:  # no cache, or none to read: nothing Python could load either
                continue
            for name in names:
                if name.startswith(f"{source.stem}.") and name.endswith(".pyc"):
                    with contextlib.suppress(OSError):
                        (cache / name).unlink()

    def files(self) -> list[str]:
        """Every file held that is there, relative to the root, in the commands' order."""
        keys = [key for keys in self._keys.values() for key in keys if not key.endswith("/")]
        return list(dict.fromkeys(k for k in keys if (self.root / k).is_file()))

    def digests(self) -> dict[str, str]:
        """Every held path's state as this holds it: what a run saves to be held to later."""
        return dict(self._held)

    def _state(self, key: str) -> str:
        if key.endswith("/"):
            return "\n".join(entries(self.root / key))
        return _digest(self.root / key)

    def _named(self, command: Sequence[str]) -> list[str]:
        """The paths inside the root that the command's words name, those of a shell line it
        holds among them (`sh -c "python scripts/guard.py"`), an option's value
        (`--config=scripts/rules.toml`), the files `-m` would run, there or not (a package's
        `__init__.py` the model adds runs too), and what its Python invocations import."""
        found: list[Path] = []
        words = _words(command)
        modules = _modules(words)
        secret = _credentials(command)
        for word in [*words, *modules]:
            if not word or word.startswith("-") or word in secret:
                continue
            try:
                named = Path(os.path.normpath(self.root / word))  # an absolute word stays itself
                # the path as written, a link kept (the model may replace a link to a guard
                # outside the repository), and the file it leads to
                for path in (named, named.resolve()):
                    held = path.is_file() and path.stat().st_size <= MAX_SCRIPT_BYTES
                    if (held or not path.exists()) and path not in found:
                        found.append(path)
            except (OSError, ValueError, RuntimeError):
                continue
        reads = python_reads(self.root, words)
        files = [p for p in reads.files if p not in found and not _large(p)]
        keys = [self._key(p) for p in [*found, *files] if self._inside(p)]
        keys += [self._key(d) + "/" for d in reads.dirs]
        # nor is a path holding one (Python's script in `python --token VALUE`)
        longest_first = sorted(secret, key=len, reverse=True)
        return [k for k in dict.fromkeys(keys) if redact(k, longest_first) == k]

    def _inside(self, path: Path) -> bool:
        return path != self.root and self.root in path.parents

    def _key(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def _words(command: Sequence[str]) -> list[str]:
    """Each word of `command`, then the words of any that holds a shell line, and the value of
    each `--option=value`."""
    words = list(command)
    for word in command:
        words += _shell_line(word)
    return words + [w.split("=", 1)[1] for w in words if "=" in w]


def _shell_line(word: str) -> list[str]:
    """The words of `word` split as the shell would (else at spaces) when it holds a blank,
    else none."""
    if not any(c.isspace() for c in word):
        return []
    try:
        return shlex.split(word)
    except ValueError:  # an unclosed quote
        return word.split()


def _credentials(command: Sequence[str]) -> set[str]:
    """The words `redact_argv` masks in `command` and in each shell line it holds (a value its
    words name as a credential, whole and as the value of `--token=VALUE`; a word of a key's
    shape), and each shell line that holds one."""
    found: set[str] = set()
    for line, argv in [("", list(command)), *((w, _shell_line(w)) for w in command)]:
        masked = {w for w, shown in zip(argv, redact_argv(argv), strict=True) if w != shown}
        masked |= set(argv_secrets(argv))
        if masked and line:
            masked.add(line)
        found |= masked
    return found


MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _modules(words: list[str]) -> list[str]:
    """The files `python -m NAME` (or `-mNAME`) runs for each module `-m` names: the module, or
    the package's `__main__.py`, and the `__init__.py` of each package on the way."""
    found = []
    names = [name for flag, name in zip(words, words[1:], strict=False) if flag == "-m"]
    names += [word[2:] for word in words if word.startswith("-m") and len(word) > 2]
    for name in names:
        if MODULE.fullmatch(name):
            parts = name.split(".")
            found += [f"{'/'.join(parts)}.py", f"{'/'.join(parts)}/__main__.py"]
            found += [f"{'/'.join(parts[:n])}/__init__.py" for n in range(1, len(parts) + 1)]
    return found


def _digest(path: Path) -> str:
    """The file's git blob id (what `Started` gives for it); GONE when there is no file to
    read, OTHER or LARGE for what is no script (a FIFO is never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return GONE
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return GONE
        if not stat.S_ISREG(info.st_mode):
            return OTHER
        if info.st_size > MAX_SCRIPT_BYTES:
            return LARGE
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_SCRIPT_BYTES + 1)
    except OSError:
        return GONE
    finally:
        os.close(fd)
    if len(data) > MAX_SCRIPT_BYTES:
        return LARGE
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _large(path: Path) -> bool:
    try:
        return path.stat().st_size > MAX_SCRIPT_BYTES
    except (OSError, ValueError):
        return False
