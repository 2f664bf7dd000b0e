"""The files a task changed that its own check reads: what makes a pass worth a second look.

A check proves the work only while the task leaves the check alone. A task that edits the
test file its command names, or what decides how pytest runs at all (a `conftest.py`
anywhere, `pytest.ini`, `pytest.toml`, `tox.ini`, `setup.cfg`, `pyproject.toml`, a local
`pytest.py`, `sitecustomize.py`, a `.pth` file), can pass its check without doing the work:
weakening the assertion, collecting nothing, shadowing pytest. The harness cannot tell a fair
test edit (a task that adds tests) from such a one, so it does not refuse: the verified task,
its event and the report name the files, for the human's review.

What a command names: each word that is a path of the repository (`tests`, `check.sh`,
`tests/test_stats.py::test_median` as its file), in a `sh -c` script too, and a module it
runs by name (`python -m unittest tests.test_stats` reads `tests/test_stats.py`). A test
runner that names no path (`pytest -q`, `python -m unittest`, `make test`, `tox`) reads every
test file it finds (`test_*.py`, `*_test.py`), and make its makefile. A program that PATH
finds in the repository (a `bin/` on PATH) is the check's file too: a `bin/pytest` the task
wrote is the check. So is a copy of a top-level package elsewhere (`tests/calc/stats.py`
beside `calc/`): the tests import the copy, which pytest finds first, not the package.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from agent_cli.workspace.shell.cmdline import shell_words

CONFIG = {
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "pytest.py",
    "sitecustomize.py",
    "usercustomize.py",
    "noxfile.py",
}
# programs (or `python -m` modules) that find the tests themselves when given no path
_RUNNERS = {"pytest", "py.test", "unittest", "tox", "nox", "make", "gmake"}
_MAKEFILES = {"Makefile", "makefile", "GNUmakefile"}
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def check_files(cmds: Sequence[str], changed: Sequence[str], root: Path | None = None) -> list[str]:
    """The `changed` paths that the commands name (a file, or a file under a folder they
    name; a pytest node id counts as its file), that a test runner naming no path finds, or
    that configure how tests run. `root`: the repository, to tell a word that is a path."""
    named: set[str] = set()
    anywhere = makes = False
    for cmd in cmds:
        words = _words(cmd)
        args = [word for word in words if os.path.basename(word) not in _RUNNERS]
        paths = {p for word in args for p in _paths(word, root, changed)}
        named |= paths | {path for word in words[:1] for path in _on_path(word, root)}
        programs = {os.path.basename(word) for word in words}
        makes = makes or bool(programs & {"make", "gmake"})
        anywhere = anywhere or (bool(programs & _RUNNERS) and not paths)
    found = []
    for path in changed:
        name = PurePosixPath(path).name
        inside = any(path == n or path.startswith(n + "/") for n in named)
        config = name in CONFIG or name.endswith(".pth") or (makes and name in _MAKEFILES)
        shadow = root is not None and _shadows(path, root)
        if inside or config or shadow or (anywhere and _test_file(name)):
            found.append(path)
    return sorted(found)


def _words(cmd: str) -> list[str]:
    """The command's words, and those of a script it hands a shell (`sh -c '...'`)."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    scripts = [word for word in words if any(c.isspace() for c in word)]
    for script in scripts:
        try:
            words += shell_words(script)
        except ValueError:
            words += script.split()
    return words


def _paths(word: str, root: Path | None, changed: Sequence[str]) -> set[str]:
    """What `word` names of the repository: a path (`tests/t.py::test_a` is its file), or the
    files of a module named with dots; nothing for an option or a word that is neither."""
    if word.startswith("-") or not word.strip() or any(c.isspace() for c in word):
        return set()
    path = word.split("::", 1)[0].removeprefix("./").rstrip("/")
    if path in ("", ".") or os.path.isabs(path):
        return set()
    exists = root is not None and _there(root / path)
    if "/" in path or path.endswith(".py") or exists or path in changed:
        return {path}
    if _MODULE.fullmatch(path) and "." in path:  # `tests.test_stats`, `tests.test_stats.T`
        parts = path.split(".")
        return {"/".join(parts[:k]) + ".py" for k in range(2, len(parts) + 1)} | {"/".join(parts)}
    return set()


def _on_path(program: str, root: Path | None) -> set[str]:
    """The repository file that PATH finds for `program` (a `bin/` or `.` on PATH makes a
    `bin/pytest` the task wrote the check's pytest), as a path relative to `root`."""
    if root is None or not program or "/" in program:
        return set()
    top = root.resolve()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        found = (Path(entry) if os.path.isabs(entry) else top / entry) / program
        if _there(found) and found.is_file() and os.access(found, os.X_OK):
            where = Path(os.path.realpath(found.parent)) / found.name  # a link is the file
            return {where.relative_to(top).as_posix()} if where.is_relative_to(top) else set()
    return set()


def _shadows(path: str, root: Path) -> bool:
    """Whether `path` is Python code in a copy of a top-level package or module of the
    repository in a plain folder (`tests/calc/stats.py` beside `calc/`, `tests/calc.py`):
    pytest puts a test's folder first on sys.path, so the copy is what the tests import."""
    parts = PurePosixPath(path).parts
    if not path.endswith(".py") or len(parts) < 2:
        return False
    for i in range(1, len(parts)):
        if (root.joinpath(*parts[:i]) / "__init__.py").is_file():
            return False  # inside a package: a module of its own, not first on sys.path
        name = parts[i].removesuffix(".py") if i == len(parts) - 1 else parts[i]
        here = "/".join([*parts[:i], name])
        homes = (name, f"src/{name}")
        if here in homes:
            return False  # the package itself, at the top or under src/
        if (
            any((root / home / "__init__.py").is_file() for home in homes)
            or (root / f"{name}.py").is_file()
        ):
            return True
    return False


def _there(path: Path) -> bool:
    """Whether `path` exists; False for a name the file system refuses (a word too long)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _test_file(name: str) -> bool:
    """Whether a file is one pytest or unittest finds by default."""
    return name.endswith(".py") and (name.startswith("test") or name.endswith("_test.py"))
