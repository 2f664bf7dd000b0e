"""Repositories in states the agent must not work in: each gets one clear line, never a
traceback, no model call (or, for the branch clash, no change), and the repository as it was."""

from __future__ import annotations

import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from agent_cli.llm.fake.server import FakeOpenAIServer
from conftest import git, make_repo
from reliability.relkit import GOAL, PY, cli_env, finish, make_done, plan, repo_with, task


def _detached(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach", "HEAD")


def _no_commits(repo: Path) -> None:
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    git(repo, "init", "-q", "-b", "main")


def _merge_in_progress(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "README.md").write_text("theirs\n")
    git(repo, "commit", "-qam", "theirs")
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("ours\n")
    git(repo, "commit", "-qam", "ours")
    merge = subprocess.run(["git", "merge", "other"], cwd=repo, capture_output=True)
    assert merge.returncode != 0 and (repo / ".git" / "MERGE_HEAD").exists()


def _rebase_in_progress(repo: Path) -> None:
    _merge_in_progress(repo)
    git(repo, "merge", "--abort")
    rebase = subprocess.run(["git", "rebase", "other"], cwd=repo, capture_output=True)
    assert rebase.returncode != 0


def _not_a_repository(repo: Path) -> None:
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)


STATES = [
    (_detached, "HEAD is detached (not on a branch)", "git switch"),
    (_no_commits, "the repository has no commits yet", "git commit --allow-empty"),
    (_merge_in_progress, "a merge is in progress in this repository", "git merge --abort"),
    (_rebase_in_progress, "a rebase is in progress in this repository", "git rebase --abort"),
    (_not_a_repository, "is not inside a git repository", "--repo DIR"),
]


def _status(repo: Path) -> tuple[str, str]:
    if not (repo / ".git").exists():
        return "", ""
    head = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout
    return head, git(repo, "status", "--porcelain=v1", "--untracked-files=all")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every state made in its own repository, and `agent run` started in all of them at once."""
    tmp = tmp_path_factory.mktemp("git-states")
    started = {}
    with ExitStack() as stack:
        for make_state, _, _ in STATES:
            repo = repo_with(tmp / make_state.__name__)
            make_state(repo)
            srv = stack.enter_context(FakeOpenAIServer([plan(task()), make_done(), finish()]))
            proc = subprocess.Popen(
                [PY, "-m", "agent_cli", "run", GOAL, "--yes", "--base-url", srv.url],
                cwd=repo,
                env=cli_env(tmp / "home"),
                text=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            started[make_state] = (repo, _status(repo), srv, proc)
        results = {}
        for make_state, (repo, before, srv, proc) in started.items():
            out, err = proc.communicate(timeout=120)
            results[make_state] = (
                proc.returncode,
                out,
                err,
                before,
                _status(repo),
                list(srv.chat_requests),
            )
    return results


@pytest.mark.parametrize(
    "make_state, says, hint", STATES, ids=[s[0].__name__.strip("_") for s in STATES]
)
@pytest.mark.slow
def test_an_unusable_repository_state_is_one_clear_line(outcomes, make_state, says, hint):
    code, out, err, before, after, requests = outcomes[make_state]
    assert code == 1, out + err
    line = err.strip()
    assert line.startswith("error: ") and says in line and hint in line, line
    assert len(line.splitlines()) == 1 and "Traceback" not in out + err
    assert requests == []
    assert after == before


def test_a_branch_name_that_already_exists_is_one_clear_line(
    agent_in_process, fake_server, tmp_path
):
    # The run's branch is agent/<run-id>; a branch named `agent` makes every such name clash.
    repo = repo_with(tmp_path / "repo")
    git(repo, "branch", "agent")
    before = _status(repo), git(repo, "branch", "--list")
    srv = fake_server([plan(task()), make_done(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("error: ") and "agent/" in line and "already exists" in line, line
    assert "git branch -m agent" in line
    assert len(line.splitlines()) == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert (_status(repo), git(repo, "branch", "--list")) == before
    assert len(srv.chat_requests) <= 1  # at most the plan: no task was started


def test_start_branch_refuses_an_existing_branch_with_the_way_out(tmp_path):
    from agent_cli.core.errors import GitError
    from agent_cli.workspace.git.repository import GitRepo

    repo = make_repo(tmp_path / "repo")
    git(repo, "branch", "agent/20260101-000000-abcd")
    with pytest.raises(GitError) as err:
        GitRepo(repo).start_branch("agent/20260101-000000-abcd")
    assert "already exists" in err.value.one_line() and "--resume" in err.value.one_line()
