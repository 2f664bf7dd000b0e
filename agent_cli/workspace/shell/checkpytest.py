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
that is in the command the human approved. A repository whose settings unload pytest's own
`capture` plugin (`-p no:capture`, which no `capsys` test survives) fails its checks with
`unrecognized arguments: --capture=fd`, which says why.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

ADDOPTS = "PYTEST_ADDOPTS"


@contextmanager
def check_env(env: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """A copy of `env` in which pytest captures the output of the code it runs and keeps its
    cache in a new empty folder, removed after."""
    with tempfile.TemporaryDirectory(prefix="agent-check-cache-") as folder:
        ours = f"--capture=fd -o cache_dir={shlex.quote(folder)}"
        theirs = env.get(ADDOPTS, "").strip()
        yield {**env, ADDOPTS: f"{theirs} {ours}" if theirs else ours}
