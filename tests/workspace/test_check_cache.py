"""The empty cache a check's pytest gets (workspace/shell/checkpytest.py), and none for a check
that unloads pytest's cache plugin: `cache_dir` would then be an unknown option, fatal in a
repository whose settings turn warnings into errors."""

from __future__ import annotations

import os
import sys

import pytest

from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from agent_cli.workspace.shell import checkpytest
from agent_cli.workspace.shell import runner as shell
from conftest import make_repo

PYTEST = f"{sys.executable} -m pytest -q"
# where a repository keeps warnings-as-errors, and `-p no:cacheprovider` when the check does not
SETTINGS = {
    "pyproject.toml": '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\naddopts = "{}"\n',
    "pytest.ini": "[pytest]\nfilterwarnings = error\naddopts = {}\n",
    "tox.ini": "[pytest]\nfilterwarnings = error\naddopts = {}\n",
    "setup.cfg": "[tool:pytest]\nfilterwarnings = error\naddopts = {}\n",
    "pytest.toml": '[pytest]\nfilterwarnings = ["error"]\naddopts = ["{}"]\n',
}


def _workspace(repo) -> RepoWorkspace:
    git = GitRepo(repo)
    env = shell.scrub_env(dict(os.environ), [])
    runner = CommandRunner(root=git.root, readonly=[git.git_dir], timeout_s=60, env=env)
    return RepoWorkspace(git, runner, ())


@pytest.mark.slow  # each case runs pytest
@pytest.mark.parametrize("where", ["command", "sh -c", "PYTEST_ADDOPTS", *SETTINGS])
def test_a_check_without_the_cache_plugin_passes_where_warnings_are_errors(tmp_path, where):
    repo = make_repo(tmp_path / "repo")
    (repo / "test_ok.py").write_text("def test_ok():\n    pass\n")
    unload = "-p no:cacheprovider"
    name = where if where in SETTINGS else "pyproject.toml"
    (repo / name).write_text(SETTINGS[name].format(unload if where in SETTINGS else ""))
    argv = [*PYTEST.split(), "test_ok.py"]
    if where == "command":
        argv += unload.split()
    elif where == "sh -c":
        argv = ["sh", "-c", f"{PYTEST} {unload} test_ok.py"]
    ws = _workspace(repo)
    if where == "PYTEST_ADDOPTS":
        ws.runner.env["PYTEST_ADDOPTS"] = unload
    result = ws.run_argv(argv)
    assert result.exit_code == 0, result.output  # as it passes by hand
    assert "1 passed" in result.output and "cache_dir" not in result.output


def test_with_the_cache_plugin_the_check_still_gets_an_empty_cache(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / "pytest.ini").write_text("[pytest]\naddopts = -p no:doctest\n")
    with checkpytest.check_env({}, ["pytest", "-q"], repo) as env:
        assert "-o cache_dir=" in env["PYTEST_ADDOPTS"]
    # a comment naming the plugin unloads nothing
    (repo / "pytest.ini").write_text("[pytest]\n# -p no:cacheprovider\naddopts = --lf\n")
    with checkpytest.check_env({}, ["pytest"], repo) as env:
        assert "-o cache_dir=" in env["PYTEST_ADDOPTS"]
