"""A task's commit holds no bytecode or test cache that running code wrote (the check's own
`__pycache__` first), unless git already tracks it; such files alone are no change."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from runkit import GOAL, PYTEST, add_median, events_of, facts, finish, plan, task

from conftest import git

NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": ""}  # this machine's environment sets it


@pytest.mark.slow
def test_the_demos_commit_holds_its_source_and_no_bytecode(
    agent_in_process, fake_server, demo_repo
):
    """The README's demo, with Python writing bytecode as it does by default: the check's
    `__pycache__` files stay out of the task's commit, and out of `git status`'s way."""
    srv = fake_server([plan(task()), add_median(), finish(), facts()])
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo, env=NO_BYTECODE
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (demo_repo / "calc" / "__pycache__").is_dir()  # the check wrote it
    assert git(demo_repo, "show", "--name-only", "--format=", "HEAD").split() == ["calc/stats.py"]


@pytest.mark.slow
def test_bytecode_git_tracks_is_committed_as_before(agent_in_process, fake_server, demo_repo):
    """A user who commits a `.pyc` on purpose keeps it committed: the one HEAD holds is
    committed again as the check rewrote it; the ones it does not hold stay out."""
    pyc = importlib.util.cache_from_source(str(demo_repo / "calc" / "stats.py"))
    tracked = Path(pyc).relative_to(demo_repo).as_posix()
    (demo_repo / tracked).parent.mkdir()
    (demo_repo / tracked).write_bytes(b"old")
    git(demo_repo, "add", tracked)
    git(demo_repo, "commit", "-qm", "bytecode")
    srv = fake_server([plan(task()), add_median(), finish(), facts()])
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo, env=NO_BYTECODE
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = git(demo_repo, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(files) == sorted(["calc/stats.py", tracked])


@pytest.mark.slow
def test_a_task_whose_only_change_is_bytecode_had_nothing_to_do(
    agent_in_process, fake_server, demo_repo
):
    """The check passes before the task, and the task changes nothing but the bytecode the
    check writes: nothing to do, nothing committed."""
    check = f"{PYTEST}::test_mean"
    srv = fake_server([plan(task(cmd=check)), finish(), facts()])
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo, env=NO_BYTECODE
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (demo_repo / "calc" / "__pycache__").is_dir()
    (done,) = [e for e in events_of(proc.stdout) if e["event"] == "task_done"]
    assert done["status"] == "nothing_to_do"
    assert git(demo_repo, "log", "--format=%s") == "initial\n"


SOURCELESS = {
    "tool": "run",
    "args": {
        "cmd": f"{sys.executable} -c \"import py_compile; open('m.py', 'w').write("
        "'def median(xs):\\n    s = sorted(xs)\\n    n = len(s)\\n    if not n: raise "
        "ValueError()\\n    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\\n'"
        "); py_compile.compile('m.py', cfile='calc/impl.pyc'); import os; os.remove('m.py')\""
    },
}
IMPORT_IT = {
    "tool": "edit_file",
    "args": {
        "path": "calc/stats.py",
        "old": '"""Descriptive statistics over lists of numbers."""\n',
        "new": '"""Descriptive statistics over lists of numbers."""\n\nfrom calc.impl import median\n',
    },
}


@pytest.mark.slow
def test_a_check_that_passes_only_with_bytecode_no_commit_holds_fails(
    agent_in_process, fake_server, demo_repo
):
    """`calc/impl.pyc` with no source beside it is a module Python imports, which the task's
    commit leaves out: the check runs again without it, fails, and the attempt with it."""
    srv = fake_server([plan(task()), SOURCELESS, IMPORT_IT, finish(), finish(), facts()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    verdicts = [e for e in events_of(proc.stdout) if e["event"] == "verify"]
    assert [v["passed"] for v in verdicts] == [False, False]
    assert "passes only with code the commit cannot hold: calc/impl.pyc" in verdicts[0]["reason"]
