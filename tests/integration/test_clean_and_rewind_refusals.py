"""`agent clean` and `agent rewind` in this process on real git repositories with seeded runs:
clean removes a finished worktree, keeps a rejected one's uncommitted work unless --force, and
deletes only merged agent/* branches; rewind moves only the run's own branch, resets the run's
own clean worktree, and refuses a state naming a user's branch or a worktree with changes."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_cli.agent.run.live import shown
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunRecord, RunStore
from agent_cli.cli.app import main
from agent_cli.core.models import Task
from agent_cli.workspace.lock import RunLock, live_holder
from conftest import SECRET_ENV, git, make_repo


@pytest.fixture
def agent(agent_env, monkeypatch, capsys):
    """`agent ARGS` in this process as the console entry point runs it: (exit code, out, err)."""
    for name in [k for k in os.environ if k.startswith("AGENT_") or k in SECRET_ENV]:
        monkeypatch.delenv(name)
    for name, value in agent_env.items():
        monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as done:
            main(list(args))
        captured = capsys.readouterr()
        return done.value.code or 0, captured.out, captured.err

    return run


@pytest.fixture
def repo(tmp_path):
    path = make_repo(tmp_path / "repo")
    (path / ".git" / "info" / "exclude").write_text(".agent/\n")
    return path


def seed(repo, run_id, statuses, *, worktree=False, merged=False):
    """A run with one commit per verified task on agent/RUN_ID (in its own worktree if asked)."""
    branch, base = f"agent/{run_id}", git(repo, "rev-parse", "HEAD").strip()
    where = repo / ".agent" / "worktrees" / run_id if worktree else repo
    if worktree:
        git(repo, "worktree", "add", "-q", "-b", branch, str(where))
    else:
        git(repo, "switch", "-q", "-c", branch)
    tasks = []
    for n, status in enumerate(statuses, 1):
        commit = None
        if status == "verified":
            (where / f"{run_id}-{n}.txt").write_text(f"{n}\n")
            git(where, "add", "-A")
            git(where, "commit", "-q", "-m", f"task {n}\n\nAgent-Run: {run_id}")
            commit = git(where, "rev-parse", "HEAD").strip()
        tasks.append(Task(goal=f"Add {run_id}-{n}.txt", status=status, commit=commit, attempts=1))
    if not worktree:
        git(repo, "switch", "-q", "main")
    if merged:
        git(repo, "merge", "-q", "--ff-only", branch)
    state = AgentState(goal=f"goal of {run_id}", plan=tasks)
    RunStore(repo / ".agent").save(
        RunRecord(
            run_id=run_id,
            goal=state.goal,
            branch=branch,
            base=base,
            base_branch="main",
            status="verified" if all(s == "verified" for s in statuses) else "escalated",
            agent_state=state.to_dict(),
            worktree=str(where) if worktree else "",
        )
    )
    return where


def tip(repo, ref):
    return git(repo, "rev-parse", ref).strip()


def test_clean_removes_a_finished_worktree_and_keeps_a_rejected_one_without_force(agent, repo):
    done = seed(repo, "run-done", ["verified"], worktree=True)
    stuck = seed(repo, "run-stuck", ["verified", "rejected"], worktree=True)
    (stuck / "half-done.txt").write_text("the rejected attempt\n")
    code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    assert f"removed worktree {done.resolve()}" in out
    assert (
        f"kept {stuck.resolve()}: it holds the uncommitted work of rejected task 2 "
        "(--force removes it)" in out
    )
    assert not done.exists() and (stuck / "half-done.txt").exists()
    assert tip(repo, "agent/run-done")  # the branch and its work stay
    code, out, _ = agent("clean", "--force", "--repo", str(repo))
    assert code == 0 and f"removed worktree {stuck.resolve()}" in out and not stuck.exists()
    code, out, _ = agent("clean", "--repo", str(repo))
    assert (code, out.strip()) == (0, "nothing to clean")


@pytest.mark.parametrize("statuses", [["verified"], ["verified", "rejected"]])
def test_clean_keeps_a_worktree_whose_detached_head_holds_commits_no_branch_has(
    agent, repo, statuses
):
    tree = seed(repo, "run-d", statuses, worktree=True)
    git(tree, "switch", "-q", "--detach")
    (tree / "mine.txt").write_text("the user's own work\n")
    git(tree, "add", "mine.txt")
    git(tree, "commit", "-q", "-m", "my own change")
    mine = tip(tree, "HEAD")
    code, out, err = agent("clean", "--force", "--repo", str(repo))
    assert code == 0, err
    assert f"kept {tree.resolve()}: its detached HEAD holds commits no branch has" in out
    assert tip(tree, "HEAD") == mine  # the work tree, and the commit with it, stay


def test_a_worktree_git_will_not_remove_is_kept_and_the_others_are_cleaned(agent, repo):
    locked = seed(repo, "run-a", ["verified"], worktree=True)
    done = seed(repo, "run-b", ["verified"], worktree=True)
    git(repo, "worktree", "lock", "--reason", "on a slow disk", str(locked))
    code, out, err = agent("clean", "--force", "--repo", str(repo))
    assert code == 0, err
    assert f"kept {locked.resolve()}: git worktree failed: fatal: cannot remove a locked" in out
    assert f"removed worktree {done.resolve()}" in out
    assert locked.exists() and not done.exists()


def test_a_locked_worktree_whose_folder_is_gone_holds_up_no_clean_and_no_rewind(agent, repo):
    away = seed(repo, "run-a", ["verified"], worktree=True)
    done = seed(repo, "run-b", ["verified"], worktree=True)
    seed(repo, "run-c", ["verified"])
    git(repo, "worktree", "lock", "--reason", "on a drive not mounted now", str(away))
    shutil.rmtree(away)  # as the drive unmounted looks
    code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    assert f"removed worktree {done.resolve()}" in out and f"kept {away.resolve()}" in out
    code, out, err = agent("rewind", "run-c", "--yes", "--repo", str(repo))
    assert code == 0, err
    assert str(away.resolve()) in git(repo, "worktree", "list")  # git still knows it, locked


def test_a_run_whose_own_worktree_is_locked_and_gone_is_not_rewound(agent, repo):
    away = seed(repo, "run-away", ["verified"], worktree=True)
    before = tip(repo, "agent/run-away")
    git(repo, "worktree", "lock", "--reason", "on a drive not mounted now", str(away))
    shutil.rmtree(away)  # as the drive unmounted looks
    code, out, err = agent("rewind", "run-away", "--yes", "--repo", str(repo))
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"the run's worktree {away.resolve()}, which is locked and not here" in err, err
    assert f"git worktree remove -f -f {away.resolve()}" in err and "nothing was changed" in err
    assert tip(repo, "agent/run-away") == before and str(away.resolve()) in git(
        repo, "worktree", "list"
    )
    plan = AgentState.from_dict(RunStore(repo / ".agent").load("run-away").agent_state).plan
    assert [t.status for t in plan] == ["verified"]


def strays(tree, how):
    """The run's worktree folder as the user left it: emptied, its files replaced by the
    user's, or a repository of their own in its place; what is in it."""
    shutil.rmtree(tree)
    tree.mkdir()
    if how == "replaced":
        (tree / "mine.txt").write_text("the user's own\n")
    elif how == "a clone":
        make_repo(tree)
    return sorted(p.name for p in tree.iterdir())


@pytest.mark.parametrize("how", ["emptied", "replaced", "a clone"])
def test_a_worktree_folder_that_is_no_longer_a_work_tree_is_kept_and_the_rest_cleaned(
    agent, repo, how
):
    stray = seed(repo, "run-s", ["verified"], worktree=True)
    done = seed(repo, "run-done", ["verified"], worktree=True)
    stuck = seed(repo, "run-stuck", ["verified", "rejected"], worktree=True)
    (stuck / "half-done.txt").write_text("the rejected attempt\n")
    seed(repo, "run-merged", ["verified"], merged=True)
    held = strays(stray, how)
    kept = (
        f"kept {stray.resolve()}: it is no longer a git work tree of this repository (emptied, "
        "or its files replaced, by hand), and what it holds may be yours; move it aside "
        f"(mv {stray.resolve()} ELSEWHERE)"
    )
    code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    assert kept in out and f"removed worktree {done.resolve()}" in out, out
    code, out, err = agent("clean", "--force", "--branches", "--repo", str(repo))
    assert code == 0, err
    assert kept in out and f"removed worktree {stuck.resolve()}" in out, out
    assert "deleted branch agent/run-merged (merged into main)" in out, out
    assert sorted(p.name for p in stray.iterdir()) == held  # never deleted: it may be theirs
    assert not done.exists() and not stuck.exists()
    shutil.move(stray, repo.parent / "aside")  # as the line says: then clean forgets it
    code, out, err = agent("clean", "--repo", str(repo))
    assert (code, out.strip()) == (0, "nothing to clean"), err
    assert git(repo, "worktree", "list").count("\n") == 1


@pytest.mark.parametrize("how", ["emptied", "replaced"])
def test_a_run_whose_worktree_folder_is_no_longer_a_work_tree_is_not_rewound(agent, repo, how):
    import shlex

    repo = repo.rename(repo.parent / "my repo")  # a space: the command quotes the path
    tree = seed(repo, "run-s", ["verified"], worktree=True)
    held = strays(tree, how)
    before, listed = tip(repo, "agent/run-s"), git(repo, "worktree", "list")
    code, out, err = agent("runs", "--json", "--repo", str(repo))
    (row,) = json.loads(out)  # not listed as the run's checkout, which a script would work in
    assert "worktree" not in row and row["stray_folder"] == str(tree.resolve()), row
    code, out, err = agent("rewind", "run-s", "--yes", "--repo", str(repo))
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert (
        f"the run's worktree {tree.resolve()} is no longer a git work tree of this repository"
        in err
    )
    assert "nothing was changed" in err
    command = err.split("move it aside (", 1)[1].split(")", 1)[0]
    assert shlex.split(command) == ["mv", str(tree.resolve()), "ELSEWHERE"]
    assert tip(repo, "agent/run-s") == before and git(repo, "worktree", "list") == listed
    assert sorted(p.name for p in tree.iterdir()) == held
    shutil.move(tree, repo.parent / "aside")  # as the line says: then the rewind goes on
    code, out, err = agent("rewind", "run-s", "--yes", "--repo", str(repo))
    assert code == 0, err
    assert tip(repo, "agent/run-s") == tip(repo, "main")


def test_the_commands_a_refusal_suggests_quote_the_paths_in_them(agent, tmp_path):
    """A path with a space in it stays one word of the command a user copies."""
    import shlex

    repo = make_repo(tmp_path / "my repo")
    (repo / ".git" / "info" / "exclude").write_text(".agent/\n")
    seed(repo, "run-r", ["verified"])
    review = tmp_path / "my review tree"
    git(repo, "worktree", "add", "-q", str(review), "agent/run-r")  # the user looks at it
    code, _, err = agent("rewind", "run-r", "--yes", "--repo", str(repo))
    assert code == 1, err
    said = err.split("(git -C ", 1)[1].split(")", 1)[0]
    assert shlex.split(f"git -C {said}") == ["git", "-C", str(review.resolve()), "switch", "-"]

    away = seed(repo, "run-a", ["verified"], worktree=True)
    git(repo, "worktree", "lock", str(away))
    shutil.rmtree(away)  # on a drive not mounted now
    code, _, err = agent("rewind", "run-a", "--yes", "--repo", str(repo))
    assert code == 1, err
    said = err.split("(git worktree remove -f -f ", 1)[1].split(")", 1)[0]
    assert shlex.split(said) == [str(away.resolve())]

    detached = seed(repo, "run-d", ["verified"], worktree=True)
    git(detached, "switch", "-q", "--detach")
    git(detached, "commit", "-q", "--allow-empty", "-m", "the user's own")
    code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    said = out.split("(keep them: ", 1)[1].split(")", 1)[0]
    assert shlex.split(said) == ["git", "-C", str(detached.resolve()), "switch", "-c", "NAME"]

    (repo / ".agent" / "runs" / "run-u").mkdir()  # killed before its first save
    theirs = tmp_path / "their tree"
    git(repo, "worktree", "add", "-q", "-b", "agent/run-u", str(theirs))
    code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    said = out.split("(git -C ", 1)[1].split(")", 1)[0]
    assert shlex.split(f"git -C {said}") == ["git", "-C", str(theirs.resolve()), "switch", "BRANCH"]


def test_a_worktree_run_is_rewound_in_its_tree_after_the_checkout_was_renamed(agent, repo):
    seed(repo, "run-moved", ["verified", "verified"], worktree=True)
    base = git(repo, "rev-parse", "main").strip()
    moved = repo.rename(repo.parent / "renamed")  # the user renames the project's folder
    tree = moved / ".agent" / "worktrees" / "run-moved"
    code, out, err = agent("rewind", "run-moved", "--yes", "--repo", str(moved))
    assert code == 0, err
    assert tip(moved, "agent/run-moved") == base and tip(tree, "HEAD") == base
    assert not (tree / "run-moved-1.txt").exists() and not repo.exists()
    assert str(tree.resolve()) in git(moved, "worktree", "list")


def test_clean_removes_a_finished_worktree_after_the_checkout_was_renamed(agent, repo):
    seed(repo, "run-done", ["verified"], worktree=True)
    moved = repo.rename(repo.parent / "renamed")  # the user renames the project's folder
    tree = moved / ".agent" / "worktrees" / "run-done"
    code, out, err = agent("clean", "--repo", str(moved))
    assert code == 0, err
    assert out.strip() == f"removed worktree {tree.resolve()}" and not tree.exists()
    assert git(moved, "worktree", "list").count("\n") == 1 and not repo.exists()


def test_a_run_killed_between_a_commit_and_its_save_is_rewound_with_that_commit(agent, repo):
    seed(repo, "run-cut", ["verified", "running"])
    base = git(repo, "rev-parse", "main").strip()
    git(repo, "switch", "-q", "agent/run-cut")  # task 2's commit, made just before the kill
    (repo / "run-cut-2.txt").write_text("2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "task 2\n\nAgent-Run: run-cut")
    git(repo, "switch", "-q", "main")
    store = RunStore(repo / ".agent")
    record = store.load("run-cut")
    state = AgentState.from_dict(record.agent_state)
    state.committing = 1  # saved on the way to that commit, as the harness does
    record.agent_state = state.to_dict()
    store.save(record)
    code, out, err = agent("rewind", "run-cut", "--yes", "--repo", str(repo))
    assert code == 0, err
    assert tip(repo, "agent/run-cut") == base


def test_clean_branches_deletes_only_merged_agent_branches(agent, repo):
    seed(repo, "run-merged", ["verified"], merged=True)
    seed(repo, "run-open", ["verified"])
    git(repo, "branch", "feature")  # the user's own, merged too: never the agent's to delete
    code, out, err = agent("clean", "--branches", "--repo", str(repo))
    assert code == 0, err
    assert out.strip() == "deleted branch agent/run-merged (merged into main)"
    branches = git(repo, "branch", "--format=%(refname:short)").split()
    assert sorted(branches) == ["agent/run-open", "feature", "main"]


def test_rewinding_the_runs_own_clean_worktree_resets_it(agent, repo):
    tree = seed(repo, "run-wt", ["verified", "verified"], worktree=True)
    first = RunStore(repo / ".agent").load("run-wt")
    commit_1 = AgentState.from_dict(first.agent_state).plan[0].commit
    code, out, err = agent("rewind", "run-wt", "--to-task", "1", "--yes", "--repo", str(repo))
    assert code == 0, err
    assert tip(tree, "HEAD") == commit_1 and tip(repo, "agent/run-wt") == commit_1
    assert (tree / "run-wt-1.txt").exists() and not (tree / "run-wt-2.txt").exists()
    plan = AgentState.from_dict(RunStore(repo / ".agent").load("run-wt").agent_state).plan
    assert [t.status for t in plan] == ["verified", "pending"]
    assert git(repo, "status", "--porcelain") == "" and tip(repo, "HEAD") == tip(repo, "main")


def test_a_worktree_with_uncommitted_work_is_not_rewound(agent, repo):
    tree = seed(repo, "run-dirty", ["verified", "rejected"], worktree=True)
    (tree / "left.txt").write_text("the rejected attempt\n")
    before = tip(repo, "agent/run-dirty")
    code, _, err = agent("rewind", "run-dirty", "--yes", "--repo", str(repo))
    assert code == 1 and "holds uncommitted work; nothing was changed" in err
    assert tip(repo, "agent/run-dirty") == before and (tree / "left.txt").exists()


def test_a_state_naming_a_users_branch_is_refused(agent, repo):
    seed(repo, "run-x", ["verified"])
    path = repo / ".agent" / "runs" / "run-x" / "state.json"
    path.write_text(path.read_text().replace('"agent/run-x"', '"main"'))
    before = tip(repo, "main")
    code, _, err = agent("rewind", "run-x", "--yes", "--repo", str(repo))
    assert code == 1 and "is not the run's own branch agent/run-x" in err
    assert tip(repo, "main") == before


def test_the_branch_module_moves_only_agent_branches(repo):
    from agent_cli.core.errors import GitError
    from agent_cli.workspace.git.branches import AgentBranches

    head = tip(repo, "HEAD")
    branches = AgentBranches(repo)
    try:
        with pytest.raises(GitError, match="not a branch the agent created"):
            branches.move("main", head, head)
        with pytest.raises(GitError, match="not a branch the agent created"):
            branches.delete("main", head)
    finally:
        branches.close()
    assert tip(repo, "main") == head


def test_a_reset_git_refuses_names_the_tree_quoted(tmp_path):
    import shlex

    from agent_cli.core.errors import GitError
    from agent_cli.workspace.git.branches import AgentBranches

    repo = make_repo(tmp_path / "repo")
    tree = tmp_path / "a run's tree"
    git(repo, "worktree", "add", "-q", "-b", "agent/run-r", str(tree))
    head = tip(tree, "HEAD")
    admin = Path(git(tree, "rev-parse", "--absolute-git-dir").strip())
    (admin / "index.lock").write_text("")  # another git at work there
    branches = AgentBranches(repo)
    try:
        with pytest.raises(GitError) as refused:
            branches.reset_worktree(tree, "agent/run-r", head, head)
    finally:
        branches.close()
    said = refused.value.hint.removeprefix("look at it with ")
    assert shlex.split(said) == ["git", "-C", str(tree), "status"]


def test_the_lock_names_its_run_and_is_not_live_once_released(tmp_path):
    lock = RunLock(tmp_path / "run.lock")
    with lock:
        holder = live_holder(lock.path)
        assert holder is not None and holder["pid"] == os.getpid() and "run_id" not in holder
        lock.name("20261201-120000-abcd")
        holder = live_holder(lock.path)
        assert holder is not None and holder["run_id"] == "20261201-120000-abcd"
        assert holder["pid"] == os.getpid()
    assert live_holder(lock.path) is None
    (tmp_path / "run.lock").write_text('{"pid": 999999999, "started": 1.0}')  # a killed run's
    assert live_holder(tmp_path / "run.lock") is None


def test_a_killed_runs_lock_naming_a_pid_now_alive_is_not_live(agent, repo):
    """A killed run's lock file stays behind unlocked; its pid may since be another process's
    (here this one's): the run is not live, is listed interrupted, resumed and rewound."""
    import json

    from agent_cli.agent.run.live import live_ids

    seed(repo, "run-k", ["verified", "rejected"])
    store = RunStore(repo / ".agent")
    path = store.run_dir("run-k") / "state.json"
    path.write_text(path.read_text().replace('"status": "escalated"', '"status": "running"'))
    stale = {"pid": os.getpid(), "started": 1.0, "run_id": "run-k"}
    (repo / ".agent" / "run.lock").write_text(json.dumps(stale))
    assert live_holder(repo / ".agent" / "run.lock") is None
    assert live_ids(repo / ".agent") == set() and store.target(None, set()) == "run-k"
    code, out, err = agent("runs", "--json", "--repo", str(repo))
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["status"] == "interrupted" and "live" not in row
    code, out, err = agent("rewind", "run-k", "--yes", "--repo", str(repo))
    assert code == 0, err
    assert tip(repo, "agent/run-k") == store.load("run-k").base


def test_a_rewound_state_forgets_the_later_tasks_and_their_facts():
    state = AgentState(
        goal="g",
        plan=[
            Task(goal="one", status="verified", commit="a" * 40, attempts=1),
            Task(goal="two", status="verified", commit="b" * 40, attempts=2, hints=["h"]),
            Task(goal="three", status="rejected", attempts=2, last_reason="failed"),
        ],
        facts=["task 1 verified (cmd): one", "task 2 verified (cmd): two"],
        last_error="boom",
    )
    state.rewind(1)
    assert state.plan[0].commit == "a" * 40 and state.plan[0].status == "verified"
    assert [t.model_dump() for t in state.plan[1:]] == [
        Task(goal="two").model_dump(),
        Task(goal="three").model_dump(),
    ]
    assert state.facts == ["task 1 verified (cmd): one"] and state.last_error is None


def test_runs_shows_a_live_run_where_its_journal_says_and_a_starting_one(agent, repo, monkeypatch):
    import json

    from agent_cli.agent.run.journal import JournalEntry
    from agent_cli.agent.run.store import RunUsage

    def rows(where=repo) -> dict:
        code, out, err = agent("runs", "--json", "--repo", str(where))
        assert code == 0, err
        return {r["run_id"]: r for r in json.loads(out)}

    seed(repo, "run-live", ["verified", "running", "pending"])
    tree = seed(repo, "run-wt", ["running"], worktree=True)
    kept = seed(repo, "run-kept", ["verified", "rejected"], worktree=True)  # not live
    entry = JournalEntry(step=7, task=1, usage=RunUsage(prompt_tokens=10, cost_usd=0.25))
    RunStore(repo / ".agent").journal("run-live", entry.model_dump_json())
    lock = RunLock(repo / ".agent" / "run.lock")
    own = RunLock(repo / ".agent" / "runs" / "run-wt" / "run.lock")  # a worktree run's
    with lock, own:
        planning = rows()[None]  # a new run holds the lock before it has an id
        assert (planning["status"], planning["live"], planning["pid"]) == (
            "starting",
            True,
            os.getpid(),
        )
        lock.name("run-live")
        found = rows()
        live = found["run-live"]
        assert (live["status"], live["live"], live["pid"], live["task"], live["tasks"]) == (
            "running",
            True,
            os.getpid(),
            2,
            3,
        )
        assert (live["task_goal"], live["step"], live["cost_usd"]) == (
            "Add run-live-2.txt",
            7,
            0.25,
        )
        assert None not in found and found["run-wt"]["live"]
        assert "live" not in found["run-kept"] and found["run-kept"]["worktree"] == str(
            kept.resolve()
        )
        assert found["run-wt"]["worktree"] == str(tree.resolve())
        assert rows(tree)["run-wt"]["live"]  # asked from inside the worktree: the same runs
        # a worktree run takes its id before it plans, and has saved nothing yet: starting
        new = RunLock(repo / ".agent" / "runs" / "run-new" / "run.lock", repo=str(repo))
        with new:
            new.name("run-new")
            holder = json.loads(new.path.read_text())
            stamp = datetime.fromtimestamp(holder["started"], UTC).isoformat(timespec="seconds")
            planning = rows()["run-new"]
            assert planning["status"] == "starting" and planning["goal"] == ""
            assert (planning["started_at"], planning["live"], planning["pid"]) == (
                stamp,
                True,
                os.getpid(),
            )
            assert shown(planning)["status"] == f"starting: pid {os.getpid()}"
            for columns in ("120", "60"):  # a line of the table, or stacked when narrow
                monkeypatch.setenv("COLUMNS", columns)
                code, out, _ = agent("runs", "--repo", str(repo))
                said = " ".join(out.split()[out.split().index("run-new") :])
                assert said.startswith("run-new"), out
                assert f"starting: pid {os.getpid()}" in said and "0 steps" not in said, out
            new.path.write_text(json.dumps({**holder, "goal": "Add a mode function"}))
            assert rows()["run-new"]["goal"] == "Add a mode function"  # when its lock says it
        code, _, err = agent("rewind", "run-live", "--yes", "--repo", str(repo))
        assert code == 1 and f"run run-live is in progress (pid {os.getpid()})" in err
    assert not any("live" in r for r in rows().values())


def test_the_help_pages_name_the_values():
    from typer.testing import CliRunner

    from agent_cli.cli.app import app

    rewind = CliRunner().invoke(app, ["rewind", "--help"], prog_name="agent").output
    assert "agent rewind [OPTIONS] RUN-ID" in rewind and "--to-task N" in rewind
    clean = CliRunner().invoke(app, ["clean", "--help"], prog_name="agent").output
    assert "--branches" in clean and "--force" in clean


def test_a_run_starting_in_the_checkout_holds_off_a_rewind_and_another_named_run_does_not(
    agent, repo
):
    seed(repo, "run-x", ["verified"])
    base = RunStore(repo / ".agent").load("run-x").base
    lock = RunLock(repo / ".agent" / "run.lock")
    with lock:
        code, _, err = agent("rewind", "run-x", "--yes", "--repo", str(repo))
        assert code == 1 and "run run-x may be starting" in err  # it could be run-x's resume
        assert tip(repo, "agent/run-x") != base
        lock.name("run-other")  # another run holds the checkout: run-x cannot resume meanwhile
        code, out, err = agent("rewind", "run-x", "--yes", "--repo", str(repo))
        assert code == 0, err
    assert tip(repo, "agent/run-x") == base and "the run's base" in out


def test_a_run_starting_in_a_work_tree_of_the_users_holds_off_a_rewind(agent, repo, tmp_path):
    """A run resumes from whichever work tree of the user's it is started in, under that
    tree's own lock: one starting there (no id yet) could be the resume of the run."""
    from agent_cli.agent.run.live import checkout_lock

    seed(repo, "run-y", ["verified"])
    base = RunStore(repo / ".agent").load("run-y").base
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    with RunLock(checkout_lock(repo / ".agent", linked)):
        code, _, err = agent("rewind", "run-y", "--yes", "--repo", str(repo))
        assert code == 1 and "run run-y may be starting" in err, err
        assert tip(repo, "agent/run-y") != base
    code, _, err = agent("rewind", "run-y", "--yes", "--repo", str(repo))
    assert code == 0, err
    assert tip(repo, "agent/run-y") == base


def test_rewind_keeps_a_commit_the_user_added_to_the_runs_branch(agent, repo):
    seed(repo, "run-u", ["verified", "verified"])
    git(repo, "switch", "-q", "agent/run-u")
    (repo / "mine.txt").write_text("the user's own work\n")
    git(repo, "add", "mine.txt")
    git(repo, "commit", "-q", "-m", "my own change")
    mine = tip(repo, "HEAD")
    git(repo, "switch", "-q", "main")
    code, _, err = agent("rewind", "run-u", "--to-task", "1", "--yes", "--repo", str(repo))
    assert code == 1 and "did not make" in err and mine[:12] in err and "'my own change'" in err
    assert tip(repo, "agent/run-u") == mine  # nothing moved
    git(repo, "branch", "keep", mine)  # kept on a branch of the user's: the rewind may go on
    code, out, err = agent("rewind", "run-u", "--to-task", "1", "--yes", "--repo", str(repo))
    assert code == 0, err
    assert tip(repo, "keep") == mine and tip(repo, "agent/run-u") != mine


def test_rewind_keeps_the_users_amend_of_a_runs_commit_though_it_keeps_the_trailer(agent, repo):
    seed(repo, "run-a", ["verified"])
    git(repo, "switch", "-q", "agent/run-a")
    (repo / "run-a-1.txt").write_text("the user's fix of the run's work\n")
    git(repo, "commit", "-q", "-a", "--amend", "--no-edit")  # the message, trailer too, stays
    amended = tip(repo, "HEAD")
    git(repo, "switch", "-q", "main")
    code, _, err = agent("rewind", "run-a", "--yes", "--repo", str(repo))
    assert code == 1 and "did not make" in err and amended[:12] in err
    assert tip(repo, "agent/run-a") == amended  # nothing moved, nothing lost


def test_a_branch_git_will_not_delete_is_kept_and_the_rest_is_cleaned(agent, repo):
    seed(repo, "run-held", ["verified"], merged=True)
    seed(repo, "run-free", ["verified"], merged=True)
    done = seed(repo, "run-tree", ["verified"], worktree=True)
    (repo / ".git" / "refs" / "heads" / "agent" / "run-held.lock").write_text("")  # git at work
    code, out, err = agent("clean", "--branches", "--repo", str(repo))
    assert code == 0, err
    lines = out.strip().splitlines()
    assert f"removed worktree {done.resolve()}" in lines
    assert "deleted branch agent/run-free (merged into main)" in lines
    assert any(
        line.startswith("kept branch agent/run-held: git update-ref failed") for line in lines
    )
    assert "agent/run-held" in git(repo, "branch", "--list", "agent/run-held")


def test_clean_branches_keeps_a_resumable_run_and_a_branch_no_run_made(agent, repo):
    seed(repo, "run-back", ["verified", "verified"])
    code, _, err = agent("rewind", "run-back", "--yes", "--repo", str(repo))
    assert code == 0, err  # back to its base: merged into main, trivially, and not finished
    seed(repo, "run-stuck", ["rejected"])  # nothing committed: its tip is main's
    git(repo, "branch", "agent/keep-this")  # the user's own, under agent/
    seed(repo, "run-done", ["verified"], merged=True)
    seed(repo, "run-final", ["verified"], merged=True)  # its tasks passed, its final check not
    path = RunStore(repo / ".agent").run_dir("run-final") / "state.json"
    path.write_text(path.read_text().replace('"status": "verified"', '"status": "escalated"', 1))
    code, out, err = agent("clean", "--branches", "--repo", str(repo))
    assert code == 0, err
    assert "deleted branch agent/run-done (merged into main)" in out
    assert "kept branch agent/run-back: run run-back is not finished" in out
    assert "kept branch agent/run-stuck: run run-stuck is not finished" in out
    assert "kept branch agent/run-final: run run-final is not finished" in out
    assert "keep-this" not in out
    branches = git(repo, "branch", "--format=%(refname:short)").split()
    assert sorted(branches) == [
        "agent/keep-this", "agent/run-back", "agent/run-final", "agent/run-stuck", "main"
    ]  # fmt: skip


def test_clean_forgets_only_the_agents_own_missing_worktrees(agent, repo, tmp_path):
    gone = seed(repo, "run-gone", ["verified"], worktree=True)
    git(repo, "worktree", "remove", "--force", str(gone))
    git(repo, "worktree", "add", "-q", "--detach", str(gone))  # registered again, then deleted
    import shutil

    shutil.rmtree(gone)
    theirs = tmp_path / "theirs"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(theirs))
    (theirs / "staged.txt").write_text("staged\n")
    git(theirs, "add", "staged.txt")
    away = tmp_path / "away"
    theirs.rename(away)  # the user's worktree on a drive not mounted now
    code, _, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    listed = git(repo, "worktree", "list", "--porcelain")
    assert str(gone) not in listed and "feature" in listed
    away.rename(theirs)
    assert "A  staged.txt" in git(theirs, "status", "--porcelain")


def test_a_worktree_made_for_a_starting_run_is_held_from_clean_until_it_is_forgotten(agent, repo):
    from agent_cli.cli import worktree as wt

    class Said:
        def __init__(self):
            self.events = []

        def emit(self, ev):
            self.events.append(ev)

    state = repo / ".agent"
    place = wt.place_for(
        repo,
        state,
        worktree=True,
        auto=False,
        resumed=None,
        plan_only=False,
        allow_dirty=False,
        console=Said(),
    )
    assert place is not None and place.path.is_dir()
    try:  # the run has saved nothing yet: its lock says it is starting
        code, out, err = agent("clean", "--force", "--repo", str(repo))
        assert code == 0, err
        assert f"kept {place.path.resolve()}: run {place.run_id} is in progress" in out
        assert place.path.is_dir()
    finally:
        wt.forget_unstarted(place, state)
    assert not place.path.exists() and not (state / "runs" / place.run_id).exists()
    assert live_holder(state / "runs" / place.run_id / "run.lock") is None


def test_a_killed_run_is_listed_interrupted_and_a_resume_skips_one_in_progress(agent, repo):
    import json

    from agent_cli.agent.run.live import live_ids

    seed(repo, "run-old", ["verified", "rejected"])
    seed(repo, "run-wt", ["running"], worktree=True)
    store = RunStore(repo / ".agent")
    for run_id in ("run-old", "run-wt"):  # both were killed while running
        path = store.run_dir(run_id) / "state.json"
        path.write_text(path.read_text().replace('"status": "escalated"', '"status": "running"'))
    code, out, err = agent("runs", "--json", "--repo", str(repo))
    assert code == 0, err
    assert {r["run_id"]: r["status"] for r in json.loads(out)} == {
        "run-old": "interrupted",
        "run-wt": "interrupted",
    }
    assert store.target(None) == "run-wt"  # the newest unfinished
    with RunLock(store.run_dir("run-wt") / "run.lock") as own:
        own.name("run-wt")  # resumed in another process meanwhile
        assert live_ids(repo / ".agent") == {"run-wt"}
        assert store.target(None, live_ids(repo / ".agent")) == "run-old"


def test_inside_a_runs_worktree_the_repository_s_state_is_used_and_no_new_run_starts(agent, repo):
    import json

    tree = seed(repo, "run-wt", ["verified", "pending"], worktree=True)
    code, out, err = agent("runs", "--json", "--repo", str(tree))
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == ["run-wt"], err
    for args in (["recall", "anything"], ["memory", "show", "--json"]):
        code, _, err = agent(*args, "--repo", str(tree))
        assert code == 0, err
    code, _, err = agent("run", "another goal", "--yes", "--repo", str(tree))
    assert code == 2 and "is the worktree of run run-wt" in err
    assert "agent run --resume --run-id run-wt" in err
    assert not (tree / ".agent").exists()  # nothing nested: one repository, one state
    from agent_cli.workspace.git.worktree import main_work_tree

    assert main_work_tree(tree) == repo and main_work_tree(repo) == repo


def test_repositories_sharing_a_home_hold_their_own_checkout_locks(agent, tmp_path, monkeypatch):
    import json

    from agent_cli.agent.run.live import checkout_lock, live_holders

    home = tmp_path / "home-state"
    monkeypatch.setenv("AGENT_HOME", str(home))
    one, two = make_repo(tmp_path / "one"), make_repo(tmp_path / "two")
    assert checkout_lock(home, one) != checkout_lock(home, two)
    assert checkout_lock(one / ".agent", one) == one / ".agent" / "run.lock"  # as before
    with RunLock(checkout_lock(home, one), repo=str(one.resolve())) as held:
        held.name("run-of-one")
        RunLock(checkout_lock(home, two)).check()  # two's checkout is free: no refusal
        code, out, err = agent("runs", "--json", "--repo", str(two))
        assert code == 0 and json.loads(out) == [], err  # one's live run is not two's
        code, out, err = agent("runs", "--json", "--repo", str(one))
        assert code == 0 and [r["run_id"] for r in json.loads(out)] == ["run-of-one"], err
        assert [h["run_id"] for h in live_holders(home, str(two.resolve()))] == []


def test_runs_names_no_worktree_whose_folder_was_deleted_by_hand(agent, repo):
    import json
    import shutil

    tree = seed(repo, "run-gone", ["verified", "pending"], worktree=True)
    shutil.rmtree(tree)
    code, out, err = agent("runs", "--json", "--repo", str(repo))
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["run_id"] == "run-gone" and "worktree" not in row


def test_what_a_run_killed_before_its_first_save_left_is_recognised_and_cleaned(agent, repo):
    """kill -9 while planning (a worktree run: its tree and its lock naming the repository),
    or between making its branch and its first save (a run in the checkout, left on that
    branch): no state.json, no live lock. rewind says there is nothing to rewind; clean says
    what to do while the checkout is on the branch, then removes the branch and the folders."""
    import json

    runs = repo / ".agent" / "runs"
    planning, branched = "20250101-000000-aaaa", "20250101-000001-bbbb"
    tree = repo / ".agent" / "worktrees" / planning
    git(repo, "worktree", "add", "-q", "--detach", str(tree))
    (runs / planning).mkdir(parents=True)
    dead = {"pid": 2**22 + 1, "started": 1.0, "repo": str(repo.resolve()), "run_id": planning}
    (runs / planning / "run.lock").write_text(json.dumps(dead))
    git(repo, "switch", "-q", "-c", f"agent/{branched}")
    (runs / branched).mkdir()
    (runs / branched / "trajectory.jsonl").write_text('{"type": "plan"}\n')
    code, _, err = agent("rewind", branched, "--yes", "--repo", str(repo))
    assert code == 2 and f"run {branched} was stopped before it saved anything" in err, err
    assert "`agent clean` removes what it left" in err
    code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    assert f"removed worktree {tree.resolve()}" in out
    assert f"removed {runs.resolve() / planning}: run {planning} was stopped" in out
    assert f"kept branch agent/{branched}: run {branched} was stopped before it saved" in out
    assert f"git -C {repo.resolve()} switch BRANCH" in out and (runs / branched).is_dir()
    git(repo, "switch", "-q", "main")
    code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    assert f"deleted branch agent/{branched} (merged into main)" in out
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert list(runs.iterdir()) == [] and not tree.exists()


def test_a_folder_without_a_state_is_left_while_a_run_without_an_id_is_starting(agent, repo):
    """A run in the checkout holds its lock with no id until it starts: the folder it may be
    claiming has no state.json yet, and is not taken for a killed run's."""
    from agent_cli.agent.run.live import checkout_lock

    git(repo, "switch", "-q", "-c", "agent/20250101-000002-cccc")
    folder = repo / ".agent" / "runs" / "20250101-000002-cccc"
    folder.mkdir(parents=True)
    with RunLock(checkout_lock(repo / ".agent", repo), repo=str(repo.resolve())):
        code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    assert "cccc" not in out and folder.is_dir()


def test_clean_leaves_what_runs_that_went_live_after_it_looked_have(agent, repo, monkeypatch):
    """What is live is looked at first (`_live`: here, before these runs took their locks);
    each run's lock is asked again right before anything of it is removed, so a worktree run
    resumed meanwhile keeps its tree, a run resumed in the checkout its branch, and a new run
    that has saved nothing yet its tree, branch and folder."""
    import os

    from agent_cli.agent.run.live import checkout_lock
    from agent_cli.cli.commands import runs_commands

    state = repo / ".agent"
    finished = seed(repo, "run-done", ["verified"], worktree=True)
    seed(repo, "run-merged", ["verified"], merged=True)
    new = "20250101-000003-dddd"
    fresh = state / "worktrees" / new
    git(repo, "worktree", "add", "-q", "-b", f"agent/{new}", str(fresh))
    monkeypatch.setattr(runs_commands, "_live", lambda place: set())
    locks = [
        RunLock(state / "runs" / "run-done" / "run.lock"),
        RunLock(checkout_lock(state, repo)),
        RunLock(state / "runs" / new / "run.lock"),
    ]
    for lock, run_id in zip(locks, ["run-done", "run-merged", new], strict=True):
        lock.acquire()
        lock.name(run_id)
    try:
        code, out, err = agent("clean", "--force", "--branches", "--repo", str(repo))
    finally:
        for lock in locks:
            lock.release()
    assert code == 0, err
    live = f"is in progress (pid {os.getpid()})"
    assert sorted(out.splitlines()) == sorted(
        [
            f"kept {fresh.resolve()}: run {new} {live}",
            f"kept {(state / 'runs' / new).resolve()}: run {new} {live}",
            f"kept {finished.resolve()}: run run-done {live}",
            f"kept branch agent/run-merged: run run-merged {live}",
        ]
    )
    assert finished.is_dir() and fresh.is_dir() and (state / "runs" / new).is_dir()
    assert tip(repo, "agent/run-merged") and tip(repo, f"agent/{new}")
    code, out, err = agent("clean", "--force", "--branches", "--repo", str(repo))
    assert code == 0, err
    assert f"removed worktree {finished.resolve()}" in out and not finished.exists()
    assert "deleted branch agent/run-merged (merged into main)" in out
    assert f"removed {(state / 'runs' / new).resolve()} and deleted branch agent/{new}" in out
    assert not fresh.exists() and not (state / "runs" / new).exists()


def test_clean_leaves_a_folder_without_a_state_while_a_run_with_no_id_starts_after_it_looked(
    agent, repo, monkeypatch
):
    from agent_cli.agent.run.live import checkout_lock
    from agent_cli.cli.commands import runs_commands

    git(repo, "branch", "agent/20250101-000004-eeee")
    folder = repo / ".agent" / "runs" / "20250101-000004-eeee"
    folder.mkdir(parents=True)
    monkeypatch.setattr(runs_commands, "_live", lambda place: set())
    with RunLock(checkout_lock(repo / ".agent", repo), repo=str(repo.resolve())):
        code, out, err = agent("clean", "--repo", str(repo))
    assert code == 0, err
    assert out.strip() == (
        f"kept {folder.resolve()}: a run with no id yet is starting (pid {os.getpid()}), and it "
        "may be that run's"
    )
    assert folder.is_dir() and tip(repo, "agent/20250101-000004-eeee")
