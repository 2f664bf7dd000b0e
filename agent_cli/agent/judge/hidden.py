"""Whether a passing check passed on code the task's commit cannot hold.

A task's commit takes the files git lists as changed; the check runs in the whole work tree.
Python code the task put where git does not look (an ignored folder, `lib/` in .gitignore)
or in a repository of its own (`git init calc/impl`) makes the check pass here and fail in
any clone of the branch. So what is ignored or a repository of its own is noted before a
task's attempts (`snapshot`); when its check passes, the new entries that hold Python code
(`.py`, `.pyi`, `.pth`, `.so`, `.pyd`, and bytecode, which a commit takes only when git
tracks it; environments, caches and build output left out) are moved aside and the check
runs again (`recheck`). Still passing, the verdict stands; failing, the attempt fails with
the reason, which the model reads: put the work in files git tracks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from agent_cli.core.models import Verdict
from agent_cli.core.protocols import Workspace
from agent_cli.core.text import readable, some

CODE = (".py", ".pyi", ".pth", ".so", ".pyd", ".pyc", ".pyo")  # bytecode: `__pycache__` aside
# folders of environments, caches and build output: what a check may need that no commit holds
NOT_WORK = {
    "__pycache__",
    ".venv",
    "venv",
    "env",
    ".env",
    "node_modules",
    ".tox",
    ".nox",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    "site-packages",
    "build",
    "dist",
    ".eggs",
}
MAX_WALK = 5000  # entries looked at inside one new ignored folder

Rerun = Callable[[], Verdict]


def snapshot(ws: Workspace) -> set[str]:
    """The ignored paths and repositories of their own, before a task's first attempt here
    (what an earlier attempt left stays new to the next one)."""
    return set(ws.uncommittable())


def new_code(ws: Workspace, before: set[str]) -> list[str]:
    """The entries made since `before` that hold code (a repository of its own always)."""
    found = []
    for entry in ws.uncommittable():
        if entry in before or _not_work(entry):
            continue
        path = ws.root / entry.rstrip("/")
        if (path / ".git").exists() or _holds_code(path):
            found.append(entry)
    return found


def recheck(ws: Workspace, verdict: Verdict, before: set[str], rerun: Rerun) -> Verdict:
    """`verdict` (a command's pass) when it holds without the new code the commit cannot
    hold; else the failed verdict of the check run again without it."""
    hidden = new_code(ws, before)
    if not hidden:
        return verdict
    with ws.set_aside(hidden):
        again = rerun()
    if again.passed:
        return verdict
    code = "timed out" if again.exit_code is None else f"exits {again.exit_code}"
    named = some([readable(entry) for entry in hidden])  # as text: it enters working memory
    return Verdict(
        passed=False,
        judge="command",
        command=again.command,
        exit_code=again.exit_code,
        output_tail=again.output_tail,
        reason=(
            f"`{again.command}` passes only with code the commit cannot hold: {named} "
            "(ignored by git, or a repository of its own), so a clone of the branch fails; "
            f"without it the check {code}:\n{again.output_tail}\n"
            "Put the work in files git tracks."
        ),
    )


def _not_work(entry: str) -> bool:
    """Whether the entry lies in an environment, cache or build folder."""
    return any(_not_work_folder(part) for part in Path(entry.rstrip("/")).parts)


def _not_work_folder(name: str) -> bool:
    return name in NOT_WORK or name.endswith(".egg-info")


def _holds_code(path: Path) -> bool:
    """Whether `path` is a code file, or a folder with one (not counting NOT_WORK folders)."""
    if path.is_file() or path.is_symlink():
        return path.name.endswith(CODE)
    seen = 0
    for _top, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not _not_work_folder(d)]
        if any(f.endswith(CODE) for f in files):
            return True
        seen += len(files) + len(dirs)
        if seen > MAX_WALK:
            return False
    return False
