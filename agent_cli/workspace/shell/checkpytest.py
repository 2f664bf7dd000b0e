"""How every pytest a check starts runs: with an empty cache of its own, its output captured.

Both go through `PYTEST_ADDOPTS`, so they reach pytest however a check starts it (`pytest`,
`python -m pytest`, `make test`, `sh -c '...'`); they come after the repository's `addopts`
(which they override) and before the command's own arguments (which override them).

An empty cache: pytest's cache (`.pytest_cache`) is the work tree's to write, and so is a
settings file (`pytest.ini`, `pyproject.toml`, `setup.cfg`, `tox.ini`) whose `addopts` holds
`--lf` or `--sw`: together they make pytest run only the tests the cache names, so a task that
wrote both (or only the cache, in a repository whose settings hold `--lf`) passed its check on
a subset. `-o cache_dir=` a new, empty folder: `--lf` finds no failure recorded and runs every
test, `--sw` starts from the first and stops at a failure, which fails the check. Not `-p
no:cacheprovider`: `--lf`, `--ff`, `--nf` and `--sw` are that plugin's options, so a repository
with `--ff` in its `addopts` would fail every check with `unrecognized arguments`. The user's
own `.pytest_cache` is left as it was.

Output captured (`--capture=fd`): a check is judged by pytest's summary line (`3 passed in
0.05s`, `agent/judge/ran.py`), which code under test can print too. With pytest's capture on,
what the code prints (`print`, `os.write(1, ...)`, `sys.__stdout__`) goes to pytest's capture
and is shown only in its report of a failure, so a fake summary printed at import followed by
`os._exit(0)` is never seen and the run reads as cut short. `-s` (`--capture=no`) or
`--capture=tee-sys` in the repository's `addopts` turned that off; the plan gate refuses them
in a check command itself (`agent/judge/acceptance.py`).

A check that sets `PYTEST_ADDOPTS` itself (`env PYTEST_ADDOPTS=... pytest`) replaces these:
that is in the command the human approved. A check that unloads pytest's cache plugin (`-p
no:cacheprovider` in its command, in `PYTEST_ADDOPTS` or in the `addopts` of the settings file
pytest finds from the repository root) has no cache to fill, and gets no `cache_dir`: pytest
would call it an unknown option, a warning that a repository's `filterwarnings = error` makes
fatal, failing a check that passes by hand. A repository whose settings unload pytest's own
`capture` plugin (`-p no:capture`, which no `capsys` test survives) fails its checks with
`unrecognized arguments: --capture=fd`, which says why.
"""

from __future__ import annotations

import configparser
import shlex
import tempfile
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ADDOPTS = "PYTEST_ADDOPTS"
NO_CACHE = "no:cacheprovider"
# The settings files pytest looks for in a folder, in the order it takes them (pytest 9), and
# where each keeps pytest's settings: a TOML table's path, or an INI file's section.
_SETTINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pytest.toml", ("pytest",)),
    (".pytest.toml", ("pytest",)),
    ("pytest.ini", ("pytest",)),
    (".pytest.ini", ("pytest",)),
    ("pyproject.toml", ("tool", "pytest")),
    ("tox.ini", ("pytest",)),
    ("setup.cfg", ("tool:pytest",)),
)


@contextmanager
def check_env(
    env: Mapping[str, str], argv: Sequence[str] = (), root: Path | None = None
) -> Iterator[dict[str, str]]:
    """A copy of `env` in which pytest captures the output of the code it runs and keeps its
    cache in a new empty folder, removed after; no folder when the check `argv`, run in
    `root`, unloads the cache plugin."""
    with tempfile.TemporaryDirectory(prefix="agent-check-cache-") as folder:
        theirs = env.get(ADDOPTS, "").strip()
        ours = "--capture=fd"
        if not cache_unloaded([*argv, theirs], root):
            ours += f" -o cache_dir={shlex.quote(folder)}"
        yield {**env, ADDOPTS: f"{theirs} {ours}" if theirs else ours}


def cache_unloaded(words: Sequence[str], root: Path | None) -> bool:
    """Whether `-p no:cacheprovider` is among `words` (each split as a shell would, so a
    `sh -c '...'` check's script counts) or in the `addopts` of the settings pytest finds from
    `root`."""
    if _unloads(list(words)) or any(_unloads(_split(text)) for text in words):
        return True
    return root is not None and _unloads(_split(settings_addopts(root)))  # read only if needed


def _unloads(args: list[str]) -> bool:
    pairs = zip(args, [*args[1:], ""], strict=False)
    return any(a == f"-p{NO_CACHE}" or (a == "-p" and b == NO_CACHE) for a, b in pairs)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def settings_addopts(root: Path) -> str:
    """The `addopts` of the settings file pytest takes when run in `root` (the first with
    pytest's settings in `root` or a folder above it), "" when there is none."""
    for base in (root, *root.parents):
        for name, where in _SETTINGS:
            found = _addopts(base / name, where)
            if found is not None:
                return found
    return ""


def _addopts(path: Path, where: tuple[str, ...]) -> str | None:
    """The `addopts` of the settings file `path` ("" when it sets none), None when it holds
    no pytest settings (or cannot be read)."""
    try:
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".toml":
            table: Any = tomllib.loads(text)
            for key in where:
                table = table.get(key) if isinstance(table, dict) else None
            if isinstance(table, dict) and isinstance(table.get("ini_options"), dict):
                table = table["ini_options"]  # pyproject.toml's [tool.pytest.ini_options]
            if not isinstance(table, dict):
                return None
            value = table.get("addopts", "")
        else:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            if not parser.has_section(where[0]):
                return "" if path.name.endswith("pytest.ini") else None  # it counts, empty
            value = parser.get(where[0], "addopts", fallback="")
    except (OSError, UnicodeDecodeError, ValueError, configparser.Error):
        return None
    if isinstance(value, list):
        return shlex.join(str(v) for v in value)
    return str(value)
