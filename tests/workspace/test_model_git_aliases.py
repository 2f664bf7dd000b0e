"""The model's own git: `-c`, `--config-env`, GIT_CONFIG_* and aliases never reach a denied command.

Aliases are resolved the way the command's git would resolve them, in a real repository.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cli.core.errors import ToolError
from agent_cli.workspace.shell.policy import CommandPolicy
from workspace.test_git import git, make_repo


@pytest.fixture
def repo(tmp_path) -> Path:
    path = make_repo(tmp_path / "repo")
    git(path, "config", "alias.ci", "commit")
    git(path, "config", "alias.pp", "!git push origin HEAD")
    git(path, "config", "alias.hop", "ci -m hop")  # an alias of an alias
    git(path, "config", "alias.mv-main", "update-ref refs/heads/main HEAD")
    git(path, "config", "alias.st", "status --short")
    git(path, "config", "alias.sh-ok", "!git status")
    return path


@pytest.fixture
def policy(repo) -> CommandPolicy:
    return CommandPolicy("auto", state_dir=repo / ".agent", cwd=repo)


@pytest.mark.parametrize(
    "cmd, why",
    [
        ("git -c alias.x=commit x -m sneaky", "git -c and --config-env"),
        ("git -c alias.x='!git push origin main' x", "git -c and --config-env"),
        ("git -c alias.u=update-ref u refs/heads/main HEAD", "git -c and --config-env"),
        ("X=commit git --config-env=alias.y=X y", "git -c and --config-env"),
        ("git --config-env alias.y=X y", "git -c and --config-env"),
        ("git -c core.hooksPath=/tmp status", "git -c and --config-env"),
        ("git --exec-path=/tmp/evil status", "--exec-path"),
        ("git --git-dir=/tmp/other/.git log", "--git-dir/--work-tree"),
        ("git --work-tree /tmp status", "--git-dir/--work-tree"),
        ("git ci -m sneaky", "git commit changes branches"),
        ("git hop", "git commit changes branches"),
        ("git pp", "git push publishes work"),
        ("git mv-main", "git update-ref changes branches"),
        ("git -C . ci -am x", "git commit changes branches"),
        ("bash -c 'git pp'", "git push publishes work"),
        ("git config alias.zz commit && git zz -m x", "neither a git command nor an alias"),
        (
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0=commit git x",
            "GIT_CONFIG",
        ),
        ("env GIT_CONFIG_PARAMETERS=\"'alias.x'='commit'\" git x", "GIT_CONFIG"),
        ("export GIT_CONFIG_PARAMETERS=\"'alias.st'='commit'\"; git st", "GIT_CONFIG"),
        ("GIT_DIR=/tmp/other/.git git log", "GIT_DIR"),
    ],
)
def test_git_config_on_the_command_line_and_aliases_of_denied_commands_are_refused(
    policy, repo, cmd, why
):
    head = git(repo, "rev-parse", "main")
    with pytest.raises(ToolError) as err:
        policy.check(cmd)
    assert why in err.value.message, err.value.message
    assert err.value.message.startswith("command refused: ")
    assert git(repo, "rev-parse", "main") == head


@pytest.mark.parametrize(
    "cmd",
    [
        "git status",
        "git st",
        "git sh-ok",
        "git -C . log --oneline",
        "GIT_PAGER=cat git log -1",
        "git --no-pager diff",
        "git config alias.lg 'log --oneline'",
        "git push-notes",
    ],
)
def test_ordinary_git_and_aliases_of_allowed_commands_pass(policy, cmd):
    policy.check(cmd)
