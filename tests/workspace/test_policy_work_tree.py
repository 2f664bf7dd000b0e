"""A worktree run's commands may change its own tree, which lies inside the state directory."""

from __future__ import annotations

from agent_cli.workspace.shell.policy import CommandPolicy


def test_the_own_tree_is_writable_and_the_rest_of_the_state_is_not(tmp_path):
    state = tmp_path / "repo" / ".agent"
    tree = state / "worktrees" / "run-1"
    tree.mkdir(parents=True)
    policy = CommandPolicy("auto", state_dir=state, cwd=tree, work_tree=tree)
    assert policy.refusal("echo hi > done.txt") is None
    assert policy.refusal("rm -r build") is None
    assert policy.refusal(f"echo x > {tree.parent}/run-2/done.txt") is not None
    assert policy.refusal("echo x > ../../runs/run-1/state.json") is not None


def test_without_a_work_tree_the_state_directory_stays_closed(tmp_path):
    state = tmp_path / "repo" / ".agent"
    tree = state / "worktrees" / "run-1"
    tree.mkdir(parents=True)
    policy = CommandPolicy("auto", state_dir=state, cwd=tree)
    assert policy.refusal("echo hi > done.txt") is not None
