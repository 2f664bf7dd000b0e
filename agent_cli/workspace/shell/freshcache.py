"""A check's pytest reads a cache of its own, empty when the check starts.

pytest's cache (`.pytest_cache`) is the work tree's to write, and so is a settings file
(`pytest.ini`, `pyproject.toml`, `setup.cfg`, `tox.ini`) whose `addopts` holds `--lf` or
`--sw`: together they make pytest run only the tests the cache names, so a task that wrote
both (or only the cache, in a repository whose settings hold `--lf`) passes its check on a
subset. The plan gate refuses such an option in the command itself (`agent/judge/acceptance`);
here every pytest a check starts, however it is started (`pytest`, `python -m pytest`, `make
test`, `sh -c '...'`), is given `-o cache_dir=` a new, empty folder through `PYTEST_ADDOPTS`:
`--lf` then finds no failure recorded and runs every test, `--sw` starts from the first and
stops at a failure, which fails the check. Not `-p no:cacheprovider`: the options `--lf`,
`--ff`, `--nf` and `--sw` are that plugin's, so a repository with `--ff` in its `addopts`
would fail every check with `unrecognized arguments`. The user's own `.pytest_cache` is left
as it was. A check that sets `PYTEST_ADDOPTS` itself (`env PYTEST_ADDOPTS=... pytest`) or
names another `-o cache_dir` replaces this one: that is in the command the human approved.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

ADDOPTS = "PYTEST_ADDOPTS"


@contextmanager
def fresh_cache(env: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """A copy of `env` in which pytest keeps its cache in a new empty folder, removed after."""
    with tempfile.TemporaryDirectory(prefix="agent-check-cache-") as folder:
        ours = f"-o cache_dir={shlex.quote(folder)}"
        theirs = env.get(ADDOPTS, "").strip()
        yield {**env, ADDOPTS: f"{theirs} {ours}" if theirs else ours}
