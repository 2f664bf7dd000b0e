"""The files a task changed that its own check reads: what makes a pass worth a second look.

A check proves the work only while the task leaves the check alone. A task that edits the
test file its command names, or what decides how pytest runs at all (a `conftest.py`
anywhere, `pytest.ini`, `tox.ini`, `setup.cfg`, `pyproject.toml`, a local `pytest.py`,
`sitecustomize.py`, a `.pth` file), can pass its check without doing the work: skipping every
test, collecting none, shadowing pytest. The harness cannot tell a fair test edit (a task
that adds tests) from such a one, so it does not refuse: the verified task, its event and
the report name the files, for the human's review.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

CONFIG = {
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "pytest.py",
    "sitecustomize.py",
    "usercustomize.py",
    "noxfile.py",
}


def check_files(cmds: Sequence[str], changed: Sequence[str]) -> list[str]:
    """The `changed` paths that the commands name (a file, or a file under a folder they
    name; a pytest node id counts as its file) or that configure how tests run."""
    named = {_path(word) for cmd in cmds for word in _words(cmd) if _looks_like_path(word)}
    named.discard("")
    found = []
    for path in changed:
        name = PurePosixPath(path).name
        inside = any(path == n or path.startswith(n + "/") for n in named)
        if inside or name in CONFIG or name.endswith(".pth"):
            found.append(path)
    return sorted(found)


def _words(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


def _looks_like_path(word: str) -> bool:
    return not word.startswith("-") and ("/" in word or word.endswith(".py"))


def _path(word: str) -> str:
    """A command word as a path relative to the repository: `tests/t.py::test_a` is its file."""
    return word.split("::", 1)[0].removeprefix("./").rstrip("/")
