"""What a command that runs Python reads from the repository besides the files it names.

Python puts one directory first on `sys.path`: the script's own (`scripts/` for `python
scripts/guard.py`, the directory itself for `python tools/mcp`), or the working directory for
`-m`, `-c` and a script read from stdin; `-I` and `-P` put none there. Every `import` looks
there first, so a module the model adds to it (`scripts/json.py`) runs in place of the
standard library's, and a module of it that the code imports runs as part of the command.
So for each Python invocation among a command's words (an interpreter's name, `python3.12`
or a path to one, or a file whose `#!` line names one) this finds:
- the module directories whose importable entries (`entries`) are to stay as they were: that
  first directory, and each package directory of it an import goes into;
- the module files of those directories that its code imports, by its `import` statements
  (the script, the `-m` module, the `-c` code, and those files' own, in turn).
"""

from __future__ import annotations

import ast
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_SOURCE_BYTES = 16 * 1024 * 1024  # a larger file is not read for its imports
INTERPRETER = re.compile(r"(python|pypy)(\d+(\.\d+)*t?)?")
# an importable file's name after its module name: source, bytecode, an extension module
MODULE_SUFFIX = re.compile(r"py|pyc|(?:[A-Za-z0-9_-]+\.)?(?:so|pyd)")
VALUED = "WX"  # short options whose value follows (`-W error`, `-Xdev`)
LONG_VALUED = ("--check-hash-based-pycs",)


@dataclass(frozen=True)
class Invocation:
    """One run of Python: its script (as written), `-m` module or `-c` code; none: stdin."""

    script: str | None = None
    module: str | None = None
    code: str | None = None
    safe_path: bool = False  # -I or -P: nothing is put first on sys.path


@dataclass
class Reads:
    """What Python invocations read: module files (there or not) and module directories."""

    files: list[Path] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)


def python_reads(root: Path, words: list[str]) -> Reads:
    """The module files and directories inside `root` (the working directory) that the
    Python invocations among `words` read."""
    reads = Reads()
    for invocation in invocations(root, words):
        _Imports(root, invocation, reads).follow()
    return reads


def invocations(root: Path, words: list[str]) -> list[Invocation]:
    """Each Python invocation among `words`: after an interpreter's name, or a file inside
    `root` whose `#!` line names one."""
    found = []
    for i, word in enumerate(words):
        if INTERPRETER.fullmatch(os.path.basename(word)):
            found.append(parse(words[i + 1 :]))
        else:
            interpreter = _shebang(root, word)
            if interpreter is not None:
                found.append(parse([*interpreter, word]))
    return found


def parse(args: list[str]) -> Invocation:
    """What Python does with the words after its name (its own options, then what it runs)."""
    safe, i = False, 0
    while i < len(args):
        word = args[i]
        following = args[i + 1] if i + 1 < len(args) else None
        if word == "--":
            return Invocation(script=following, safe_path=safe)
        if word == "-" or not word.startswith("-"):
            return Invocation(script=None if word == "-" else word, safe_path=safe)
        if word.startswith("--"):
            i += 2 if word in LONG_VALUED else 1
            continue
        for j, flag in enumerate(word[1:], start=2):
            rest = word[j:] or following
            if flag == "m":
                return Invocation(module=rest, safe_path=safe)
            if flag == "c":
                return Invocation(code=rest, safe_path=safe)
            if flag in VALUED:
                i += 0 if word[j:] else 1
                break
            safe = safe or flag in "IP"
        i += 1
    return Invocation(safe_path=safe)


def entries(directory: Path) -> list[str]:
    """The entries of `directory` that an import can load, sorted: `NAME.py`, `NAME.pyc`, an
    extension module (`NAME.so`, `NAME.cpython-312-x86_64-linux-gnu.so`), and a package's
    `NAME/__init__.*` (NAME a Python name)."""
    found: list[str] = []
    for name, path in _scan(directory):
        module, dot, suffix = name.partition(".")
        if not module.isidentifier():
            continue
        if dot:
            if MODULE_SUFFIX.fullmatch(suffix) and path.is_file():
                found.append(name)
        elif path.is_dir():
            found += [f"{name}/{init}" for init in _inits(path)]
    return sorted(found)


class _Imports:
    """The module files and directories one invocation reads, found from the code it runs."""

    def __init__(self, root: Path, invocation: Invocation, reads: Reads) -> None:
        self.root, self.run, self.reads = root, invocation, reads
        self.first: Path | None = None  # what Python puts first on sys.path
        self.listed: dict[Path, list[str]] = {}
        self.modules: list[str] = []  # to look for, in order
        self.seen: set[str] = set()
        self.parsed: set[Path] = set()

    def follow(self) -> None:
        run = self.run
        if run.script is not None:
            script = Path(os.path.normpath(self.root / run.script))
            self._file(script)
            if not script.is_file():  # `python DIR` runs DIR/__main__.py
                self._file(script / "__main__.py")
            if not run.safe_path:
                self.first = script if script.is_dir() else _resolved(script).parent
            if script.is_dir():
                self.modules.append("__main__")
            else:
                self._source(script, "")
        elif not run.safe_path:
            self.first = self.root
        if self.first is None or not self._inside(self.first):
            return
        self._dir(self.first)
        if run.module:
            self.modules += [run.module, f"{run.module}.__main__"]
        if run.code:
            self._imports(run.code.encode(), "")
        while self.modules:
            self._module(self.modules.pop(0))

    def _module(self, name: str) -> None:
        """Each file of the first directory that `import NAME` would load (the packages on its
        way among them), and the directories it looks in."""
        if name in self.seen or self.first is None:
            return
        self.seen.add(name)
        directory, parts = self.first, name.split(".")
        for n, part in enumerate(parts, start=1):
            listed = self._listed(directory)
            found = [e for e in listed if re.split(r"[./]", e, maxsplit=1)[0] == part]
            for entry in found:
                path = directory / entry
                self._file(path)
                package = ".".join(parts[:n] if "/" in entry else parts[: n - 1])
                if entry.endswith(".py"):
                    self._source(path, package)
            below = directory / part
            # a package, or a directory that may be a namespace package's part
            if not (any("/" in e for e in found) or (not found and below.is_dir())):
                return
            directory = below
            self._dir(directory)

    def _source(self, path: Path, package: str) -> None:
        if path not in self.parsed:
            self.parsed.add(path)
            data = _read(path)
            if data is not None:
                self._imports(data, package)

    def _imports(self, source: bytes, package: str) -> None:
        for name in imported(source, package):
            if name not in self.seen:
                self.modules.append(name)

    def _file(self, path: Path) -> None:
        if self._inside(path) and path not in self.reads.files:
            self.reads.files.append(path)

    def _dir(self, path: Path) -> None:
        if self._inside(path) and path not in self.reads.dirs:
            self.reads.dirs.append(path)

    def _listed(self, directory: Path) -> list[str]:
        if directory not in self.listed:
            self.listed[directory] = entries(directory)
        return self.listed[directory]

    def _inside(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents


def imported(source: bytes, package: str) -> list[str]:
    """The modules the `import` statements of `source` name (`from a import b`: `a`, and `a.b`,
    which may be a module); relative ones from `package` ("": a script's, none resolve)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if len(parts) < node.level:
                    continue
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base:
                names.append(base)
                names += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
    return names


def _shebang(root: Path, word: str) -> list[str] | None:
    """The interpreter's options of a file inside `root` named `word` whose `#!` line names
    Python (`#!/usr/bin/env -S python3 -P`: `["-P"]`); None for any other word."""
    if not word or word.startswith("-") or any(c.isspace() for c in word):
        return None
    try:
        path = Path(os.path.normpath(root / word))
        if root not in path.parents or not path.is_file():
            return None
        with path.open("rb") as f:
            line = f.readline(512)
    except (OSError, ValueError):
        return None
    if not line.startswith(b"#!"):
        return None
    parts = line[2:].decode(errors="replace").split()
    for i, part in enumerate(parts):
        if INTERPRETER.fullmatch(os.path.basename(part)):
            return parts[i + 1 :]
    return None


def _scan(directory: Path) -> Iterator[tuple[str, Path]]:
    try:
        with os.scandir(directory) as scan:
            names = [entry.name for entry in scan]
    except OSError:
        return
    for name in names:
        yield name, directory / name


def _inits(package: Path) -> list[str]:
    return sorted(
        name
        for name, path in _scan(package)
        if name.startswith("__init__.")
        and MODULE_SUFFIX.fullmatch(name[len("__init__.") :])
        and path.is_file()
    )


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def _read(path: Path) -> bytes | None:
    """A regular file's bytes, None for anything else or a larger one (never blocks on a
    FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
