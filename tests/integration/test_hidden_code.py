"""A check that passes only on code the commit cannot hold fails the attempt."""

from __future__ import annotations

import pytest
from runkit import GOAL, GOOD_MEDIAN, MEAN_TAIL, events_of, finish, plan, state_of, task

from conftest import git

pytestmark = pytest.mark.slow
IMPORT = "\nfrom calc.lib.helper import median  # noqa: E402\n"


def _write(path: str, content: str) -> dict:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def _edit(old: str, new: str) -> dict:
    return {"tool": "edit_file", "args": {"path": "calc/stats.py", "old": old, "new": new}}


def test_code_in_an_ignored_folder_does_not_verify_a_task(agent_in_process, fake_server, demo_repo):
    (demo_repo / ".gitignore").write_text("lib/\n")
    git(demo_repo, "add", ".gitignore")
    git(demo_repo, "commit", "-qm", "ignore lib/")
    srv = fake_server(
        [
            plan(task()),
            _write("calc/lib/helper.py", GOOD_MEDIAN),  # where git does not look
            _edit(MEAN_TAIL, MEAN_TAIL + IMPORT),
            finish("median() in a helper"),
            _edit(IMPORT, GOOD_MEDIAN),  # the retry puts it where the commit takes it
            finish("median() in stats.py"),
        ]
    )
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = [e for e in events_of(proc.stdout) if e["event"] == "verify"]
    assert not first["passed"] and first["exit_code"] not in (0, None)
    assert "passes only with code the commit cannot hold: calc/lib/" in first["reason"]
    assert second["passed"] and state_of(demo_repo)["status"] == "verified"
    assert "def median" in git(demo_repo, "show", "HEAD:calc/stats.py")
    assert (demo_repo / "calc" / "lib" / "helper.py").read_text() == GOOD_MEDIAN  # put back
    assert not list(demo_repo.glob(".agent-aside-*"))


def test_code_in_a_repository_of_its_own_does_not_verify_a_task(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server(
        [
            plan(task()),
            # the file tools refuse a path inside a repository of its own: a command moves it
            _write("helper.py", GOOD_MEDIAN),
            {"tool": "run", "args": {"cmd": "git init -q calc/lib && mv helper.py calc/lib/"}},
            _edit(MEAN_TAIL, MEAN_TAIL + IMPORT),
            finish("median() in a helper"),
            finish("again"),
        ]
    )
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # rejected: both attempts
    verdicts = [e for e in events_of(proc.stdout) if e["event"] == "verify"]
    assert [v["passed"] for v in verdicts] == [False, False]
    assert "passes only with code the commit cannot hold: calc/lib/" in verdicts[0]["reason"]
