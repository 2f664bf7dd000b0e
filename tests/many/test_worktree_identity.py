"""A worktree run commits in its own tree, on its own branch: git's identity is asked there."""

from __future__ import annotations

from conftest import git, make_repo
from reliability.relkit import finish, make_done, no_facts, plan, task


def test_an_identity_only_the_users_branch_gets_stops_a_worktree_run_before_the_model(
    tmp_path, agent_in_process, fake_server, agent_env
):
    """`[includeIf "onbranch:main"]` gives the checkout an identity the run's worktree and
    branch do not get: the run stops before its first model request, not at its first
    commit after the work is done."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".gitconfig-work").write_text("[user]\n\tname = Work Me\n\temail = me@work.example\n")
    (home / ".gitconfig").write_text('[includeIf "onbranch:main"]\n\tpath = ~/.gitconfig-work\n')
    assert agent_env["HOME"] == str(home)
    srv = fake_server(  # what the run would do, were it not stopped: a task that commits
        [
            plan(task()),
            make_done(),
            finish(),
            no_facts(),
        ]
    )
    proc = agent_in_process("run", "x", "--yes", "--worktree", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "no identity" in line and "worktree" in line and "git config user.email" in line
    assert srv.chat_requests == []
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not (repo / ".agent").exists()
