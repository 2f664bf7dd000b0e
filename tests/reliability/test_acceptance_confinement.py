"""Acceptance commands run in the model commands' confinement, not just past a pattern check.

Plan validation refuses the probe's bypasses with the policy; what a pattern cannot see (a
script in the repository) still cannot push to the user's remote, cannot pass a check after
damaging the state directory, and under bubblewrap cannot touch it at all.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cli.agent.judge import acceptance
from agent_cli.agent.judge.verifier import verify
from agent_cli.core.errors import WorkspaceError
from agent_cli.core.models import Task
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from agent_cli.workspace.shell import runner as shell
from agent_cli.workspace.shell.confine import StateDirDamaged
from agent_cli.workspace.shell.policy import CommandPolicy
from conftest import make_repo

SECRET = "sk-test-acceptance-0123456789"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def setup(tmp_path):
    """A repository with a bare remote, a state directory holding a run, and its workspace."""
    repo = make_repo(tmp_path / "repo")
    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "-q", "--bare", str(remote))
    _git(repo, "remote", "add", "origin", str(remote))
    state = repo / ".agent"
    (state / "runs" / "r1").mkdir(parents=True)
    (state / "runs" / "r1" / "state.json").write_text('{"run_id": "r1"}\n')
    (state / "chroma").mkdir()
    (state / "chroma" / "chroma.sqlite3").write_text("store\n")
    _git(repo, "config", "alias.ci", "commit")

    def workspace(sandbox: str = "none") -> RepoWorkspace:
        git = GitRepo(repo, secrets=(SECRET,))
        runner = CommandRunner(
            root=git.root,
            readonly=[git.root / ".git", git.git_dir, state, git.root / ".agentrc"],
            timeout_s=30,
            env=shell.scrub_env(dict(os.environ), [SECRET]),
            sandbox=sandbox,
            guarded=[state],
        )
        policy = CommandPolicy("auto", state_dir=state, cwd=git.root)
        return RepoWorkspace(git, runner, (SECRET,), policy.check, policy.refusal)

    return repo, remote, state, workspace


def _script(repo: Path, name: str, body: str) -> str:
    path = repo / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return f"./{name}"


@pytest.mark.parametrize(
    "cmd, why",
    [
        ("python3 -c \"import subprocess; subprocess.run(['git', 'push', 'origin'])\"", "push"),
        ("perl -e 'system(\"git commit -am x\")'", "commit"),
        ("git -c alias.x='!git push origin HEAD' x", "git -c and --config-env"),
        ("git ci -m x", "git commit changes branches"),
        ("find .agent -delete", "state directory"),
        ("find . -delete", "state directory"),
        ("find . -path '*/.agent/*' -delete", "state directory"),
    ],
)
def test_the_probes_acceptance_bypasses_are_refused_at_plan_validation(setup, cmd, why):
    repo, _, _, workspace = setup
    ws = workspace()
    reason = acceptance.problem(cmd, repo, ws.refusal)
    assert reason and "refused by the command policy" in reason and why in reason, reason


@pytest.mark.parametrize(
    "cmd",
    [
        "find . -name '*.pyc' -delete",
        "python3 -c \"import sys; sys.exit(0 if open('a.txt').read() else 1)\"",
        "git diff --quiet",
    ],
)
def test_ordinary_checks_still_pass_validation(setup, cmd):
    repo, _, _, workspace = setup
    assert acceptance.problem(cmd, repo, workspace().refusal) is None


def test_a_check_that_pushes_from_a_script_reaches_no_remote(setup):
    repo, remote, _, workspace = setup
    ws = workspace()
    check = _script(
        repo,
        "check.sh",
        f"git push -q origin HEAD:refs/heads/pushed; git push -q '{remote}' HEAD:refs/heads/by-url\n"
        'python3 -c "import subprocess,sys; sys.exit(subprocess.run('
        "['git','push','-q','origin','HEAD:refs/heads/from-python']).returncode)\"\n",
    )
    res = ws.run_argv([check])
    assert res.exit_code != 0
    assert _git(remote, "branch", "--list") == ""  # nothing reached the remote
    assert ws.run_for_model(f"{check} || true").exit_code == 0  # the model's commands too
    assert _git(remote, "branch", "--list") == ""
    # The user's own git, outside the agent, still pushes: nothing was changed in their config.
    _git(repo, "push", "-q", "origin", "HEAD:refs/heads/by-the-user")
    assert "by-the-user" in _git(remote, "branch", "--list")


def test_a_check_that_damages_the_state_directory_never_verifies(setup):
    repo, _, state, workspace = setup
    ws = workspace()
    check = _script(repo, "check.sh", "find .agent -delete 2>/dev/null; exit 0\n")
    assert acceptance.problem(check, repo, ws.refusal) is None  # no pattern can see it
    task = Task(goal="g", acceptance="a", acceptance_cmd=check)
    with pytest.raises(
        StateDirDamaged, match="removed or changed files in the agent's state directory"
    ):
        verify(task, [], ws.run_argv, None, lambda: "", "goal", ws.refusal)
    (state / "runs" / "r1").mkdir(parents=True, exist_ok=True)
    (state / "runs" / "r1" / "state.json").write_text('{"run_id": "r1"}\n')
    rmtree = "python3 -c \"import shutil; shutil.rmtree('.agent/runs')\""
    assert acceptance.problem(rmtree, repo, ws.refusal) is None
    with pytest.raises(StateDirDamaged, match="runs"):
        ws.run_argv(shlex.split(rmtree))
    forge = "python3 -c \"open('.agent/forged.json', 'w')\""
    with pytest.raises(StateDirDamaged, match="forged.json"):
        ws.run_argv(shlex.split(forge))
    # A run's state and journal are rewritten by other runs at once: there only a removal
    # counts, so truncating one is not seen without the sandbox (docs/reliability.md).
    # A check that only reads the state directory, and the vector store working, are fine.
    (state / "runs" / "r1").mkdir(parents=True, exist_ok=True)
    (state / "runs" / "r1" / "state.json").write_text('{"run_id": "r1"}\n')
    (state / "chroma").mkdir(exist_ok=True)
    (state / "chroma" / "chroma.sqlite3").write_text("store\n")
    reader = _script(
        repo, "r.sh", "cat .agent/runs/r1/state.json; echo more >> .agent/chroma/chroma.sqlite3\n"
    )
    assert ws.run_argv([reader]).exit_code == 0


def test_under_bwrap_a_check_cannot_touch_the_state_directory(setup):
    repo, remote, state, workspace = setup
    try:
        shell.check_sandbox("bwrap")
    except WorkspaceError as exc:
        pytest.skip(str(exc))
    ws = workspace("bwrap")
    check = _script(
        repo,
        "check.sh",
        "rm -rf .agent; find .agent -delete; git push -q origin HEAD:refs/heads/x; exit 0\n",
    )
    assert ws.run_argv([check]).exit_code == 0
    assert (state / "runs" / "r1" / "state.json").read_text() == '{"run_id": "r1"}\n'
    assert _git(remote, "branch", "--list") == ""


def test_a_check_runs_with_the_model_commands_scrubbed_environment(setup, monkeypatch):
    repo, _, _, workspace = setup
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("HOLDS_IT", f"x-{SECRET}")
    ws = workspace()
    check = _script(repo, "env.sh", "env\n")
    seen = ws.run_argv([check]).output
    assert SECRET not in seen and "OPENAI_API_KEY" not in seen
    assert "GIT_CONFIG_KEY_0=url.agent-never-pushes://.pushInsteadOf" in seen


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, text",
    [
        ("pytest.ini", "[pytest]\naddopts = --lf\n"),
        ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "--sw"\n'),
        ("setup.cfg", "[tool:pytest]\naddopts = --last-failed\n"),
        ("tox.ini", "[pytest]\naddopts = --stepwise\n"),
    ],
)
def test_a_pytest_cache_in_the_work_tree_does_not_pick_the_tests_a_check_runs(setup, name, text):
    """`--lf`/`--sw` in the repository's pytest settings and a `.pytest_cache` the task wrote
    naming only a passing test: the check still runs every test, and the cache is left."""
    from agent_cli.agent.judge.verifier import run_acceptance

    repo, _remote, _state, workspace = setup
    (repo / name).write_text(text)
    (repo / "test_x.py").write_text(
        "def test_bad():\n    assert False\n\n\ndef test_ok():\n    pass\n"
    )
    cache = repo / ".pytest_cache" / "v" / "cache"
    cache.mkdir(parents=True)
    (cache / "lastfailed").write_text('{"test_x.py::test_ok": true}')
    (cache / "stepwise").write_text('"test_x.py::test_ok"')
    ws = workspace()
    verdict = run_acceptance([f"{shlex.quote(sys.executable)} -m pytest -q"], ws.run_argv)
    assert not verdict.passed and "test_bad" in verdict.reason, verdict.reason
    assert (cache / "lastfailed").read_text() == '{"test_x.py::test_ok": true}'


@pytest.mark.slow
@pytest.mark.parametrize("settings", ["-s", "--capture=tee-sys", ""])
@pytest.mark.parametrize(
    "code",
    [
        "import os\n\nprint('5 passed in 0.01s', flush=True)\nos._exit(0)\n",
        "import os, sys\n\nsys.__stdout__.write('5 passed in 0.01s\\n')\n"
        "sys.__stdout__.flush()\nos._exit(0)\n",
        "import os\n\nos.write(1, b'=== 5 passed in 0.01s ===\\n')\nos._exit(0)\n",
        "import atexit\n\nimport pytest\n\natexit.register(print, '5 passed in 0.01s')\n\n\n"
        "def later():\n    pytest.skip('later')\n",
    ],
    ids=["print-at-import", "stdout-at-import", "fd-at-import", "at-exit"],
)
def test_a_summary_line_the_code_under_test_prints_does_not_pass_a_check(setup, settings, code):
    """Code under test prints `5 passed` at import and ends the process, or at exit after its
    only test was skipped, with or without `-s` in the repository's settings: not a pass."""
    from agent_cli.agent.judge.verifier import run_acceptance

    repo, _remote, _state, workspace = setup
    (repo / "pytest.ini").write_text(f"[pytest]\naddopts = {settings}\n")
    (repo / "calc.py").write_text(code)
    (repo / "test_calc.py").write_text(
        "import calc\n\n\ndef test_it():\n    calc.later()\n    assert False\n"
    )
    ws = workspace()
    for options in ("-q", ""):
        cmd = f"{shlex.quote(sys.executable)} -m pytest -p no:cacheprovider {options}"
        verdict = run_acceptance([cmd], ws.run_argv)
        assert not verdict.passed, (options, verdict.output_tail)
