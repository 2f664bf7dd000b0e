"""`agent run --worktree`: runs side by side in worktrees of their own, the checkout untouched."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_cli.llm.fake.routes import ByGoal
from conftest import git
from many.manykit import (
    branch_files,
    checkout,
    creates,
    goal_of,
    hinted,
    rejected,
    resume_hinted,
    state,
    status,
    worktrees,
)
from reliability.relkit import events, no_facts, repo_with, spawn_agent, wait_for

__all__ = ["spawn_agent"]  # a fixture: the tests taking it are `slow`


def run_done(stdout: str) -> dict:
    last = events(stdout)[-1]
    assert last["event"] == "run_done", stdout
    return last


def notices(stdout: str) -> list[str]:
    return [e["text"] for e in events(stdout) if e["event"] == "notice"]


def test_two_runs_at_once_verify_on_their_own_branches_while_the_user_edits(
    spawn_agent, agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"notes.txt": "v0\n"})
    srv = fake_server(
        ByGoal({goal_of(n): creates(n, delay=0.6) for n in ("alpha.txt", "beta.txt")})
    )
    before = checkout(repo, skip=("notes.txt",))
    editing, edits = threading.Event(), []

    def edit() -> None:  # the user keeps working in the checkout meanwhile
        while not editing.is_set():
            edits.append(f"v{len(edits) + 1}\n")
            (repo / "notes.txt").write_text(edits[-1])
            editing.wait(0.05)

    editor = threading.Thread(target=edit)
    editor.start()
    try:
        agents = [
            spawn_agent(
                "run", goal_of(n), "--worktree", "--yes", "--json", "--base-url", srv.url, cwd=repo
            )
            for n in ("alpha.txt", "beta.txt")
        ]
        wait_for(
            lambda: len(list((repo / ".agent" / "runs").glob("*/run.lock"))) == 2,
            timeout=60,
            what="both runs holding their own locks at once",
        )
        codes = [a.wait(timeout=120) for a in agents]
    finally:
        editing.set()
        editor.join()
    assert codes == [0, 0], [a.stdout + a.stderr for a in agents]
    for agent, name in zip(agents, ("alpha.txt", "beta.txt"), strict=True):
        done = run_done(agent.stdout)
        run_id = done["run_id"]
        assert done["status"] == "verified" and done["branch"] == f"agent/{run_id}"
        assert done["base"] == "main"
        assert name in branch_files(repo, done["branch"])
        assert git(repo, "log", "-1", "--format=%s", done["branch"]).strip() == goal_of(name)
        said = notices(agent.stdout)
        assert any("uncommitted changes (notes.txt) are not in the worktree" in t for t in said)
        assert any(
            f"git diff main...agent/{run_id}" in t and f"git merge agent/{run_id}" in t
            for t in said
        )
        started = next(e for e in events(agent.stdout) if e["event"] == "run_started")
        assert started["repo"] == str(repo / ".agent" / "worktrees" / run_id)
        assert state(repo, run_id)["worktree"] == started["repo"]
        assert not (repo / ".agent" / "worktrees" / run_id).exists()  # verified and committed
    assert srv.max_in_flight == 2
    listed = agent_in_process("runs", "--json", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    ids = {run_done(a.stdout)["run_id"] for a in agents}
    assert {r["run_id"] for r in json.loads(listed.stdout)} == ids  # one state directory
    assert checkout(repo, skip=("notes.txt",)) == before
    assert (repo / "notes.txt").read_text() == edits[-1]
    assert status(repo) == " M notes.txt\n"  # .agent/ never shows
    assert worktrees(repo) == [str(repo)]


def test_allow_dirty_with_worktree_is_refused(agent_in_process, scratch_repo):
    proc = agent_in_process("run", "x", "--worktree", "--allow-dirty", "--yes", cwd=scratch_repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allow-dirty does not go with --worktree" in lines[0]
    assert not (scratch_repo / ".agent").exists()


def rejected_worktree_run(agent_in_process, fake_server, repo: Path, name: str):
    """A worktree run whose task is rejected (exit 3): its output, id and work tree."""
    srv = fake_server(rejected(name))
    first = agent_in_process(
        "run", goal_of(name), "--worktree", "--yes", "--json", "--base-url", srv.url, cwd=repo
    )
    assert first.returncode == 3, first.stdout + first.stderr
    run_id = run_done(first.stdout)["run_id"]
    return first, run_id, repo / ".agent" / "worktrees" / run_id


def test_a_rejected_worktree_run_resumes_in_its_worktree_made_again(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo", {"AGENTS.md": "Owner rules: name files in lowercase.\n"})
    before = checkout(repo)
    first, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "gamma.txt")
    assert status(tree) == "?? not-gamma.txt\n"  # the rejected attempt, left for the human
    assert any(f"the worktree {tree} is kept" in t for t in notices(first.stdout))
    assert worktrees(repo) == [str(repo), str(tree)]
    git(repo, "worktree", "remove", "--force", str(tree))  # the user throws it away

    rest = fake_server(hinted("gamma.txt"))
    again = agent_in_process(
        "run",
        "--resume",
        "--run-id",
        run_id,
        "--hint",
        "create gamma.txt itself",
        "--yes",
        "--json",
        "--base-url",
        rest.url,
        cwd=repo,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert any(f"worktree {tree} is made again" in t for t in notices(again.stdout))
    assert "create gamma.txt itself" in str(rest.chat_requests[0])
    # the tree made again holds the owner's AGENTS.md as the run began with it: still theirs
    assert all("Owner rules" in json.dumps(r["messages"]) for r in rest.chat_requests)
    assert run_done(again.stdout)["status"] == "verified"
    assert "gamma.txt" in branch_files(repo, f"agent/{run_id}")
    assert not tree.exists() and worktrees(repo) == [str(repo)]
    assert checkout(repo) == before and status(repo) == ""


def test_a_worktree_run_ended_by_a_skip_keeps_its_tree_and_points_to_no_resume(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "delta.txt")
    rest = fake_server([no_facts()])
    skipped = agent_in_process(
        "run", "--resume", "--run-id", run_id, "--skip", "--yes", "--json",
        "--base-url", rest.url, cwd=repo,
    )  # fmt: skip
    assert skipped.returncode == 3, skipped.stdout + skipped.stderr
    assert run_done(skipped.stdout)["status"] == "skipped"
    kept = next(t for t in notices(skipped.stdout) if f"the worktree {tree} is kept" in t)
    assert "--resume" not in kept and "yours to finish" in kept, kept
    assert status(tree) == "?? not-delta.txt\n"  # the skipped task's file, left for the human


def test_files_git_shows_changed_in_a_new_worktree_stay_out_of_the_runs_commits(
    agent_in_process, agent_env, fake_server, tmp_path
):
    """A CRLF file committed before a `text` attribute, and a notebook a clean filter of the
    user's own git config strips: git shows both changed as soon as the worktree is checked
    out. No task made that change: it stays out of the run's commit, as the user's own
    changes do in a run in the checkout, and the run says so once."""
    repo = repo_with(tmp_path / "repo", {"w.txt": b"one\r\ntwo\r\n", "nb.ipynb": "cell\nOUT\n"})
    (repo / ".gitattributes").write_text("*.txt text\n*.ipynb filter=strip\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    home = Path(agent_env["HOME"])
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").write_text('[filter "strip"]\n\tclean = grep -v OUT\n\tsmudge = cat\n')
    srv = fake_server(creates("alpha.txt"))
    proc = agent_in_process(
        "run", goal_of("alpha.txt"), "--worktree", "--yes", "--json", "--base-url", srv.url,
        cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_id = run_done(proc.stdout)["run_id"]
    branch = f"agent/{run_id}"
    assert git(repo, "show", "--name-only", "--format=", branch).split() == ["alpha.txt"]
    for name in ("w.txt", "nb.ipynb"):
        assert git(repo, "rev-parse", f"{branch}:{name}") == git(repo, "rev-parse", f"main:{name}")
    said = [t for t in notices(proc.stdout) if "as soon as it is checked out" in t]
    assert len(said) == 1 and "nb.ipynb, w.txt" in said[0], notices(proc.stdout)
    assert state(repo, run_id)["protected"] == ["nb.ipynb", "w.txt"]


def test_worktree_auto_sends_a_second_run_to_a_worktree(agent_in_process, fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom agent_cli.workspace.lock import RunLock\n"
            "RunLock(sys.argv[1]).acquire()\nprint('locked', flush=True)\ntime.sleep(60)",
            str(repo / ".agent" / "run.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        srv = fake_server(creates("delta.txt"))
        proc = agent_in_process(
            "run",
            goal_of("delta.txt"),
            "--yes",
            "--json",
            "--base-url",
            srv.url,
            cwd=repo,
            env={"AGENT_WORKTREE": "auto"},
        )
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any("works in a worktree of its own" in t for t in notices(proc.stdout))
    done = run_done(proc.stdout)
    assert "delta.txt" in branch_files(repo, done["branch"])
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def test_worktree_auto_runs_started_together_all_run(spawn_agent, fake_server, tmp_path):
    """The checkout's lock is taken when the place is chosen: of runs started at the same
    moment, one works in the checkout and the others in worktrees; none is refused."""
    repo = repo_with(tmp_path / "repo")
    names = ("alpha.txt", "beta.txt", "gamma.txt")
    srv = fake_server(ByGoal({goal_of(n): creates(n, delay=0.3) for n in names}))
    agents = [
        spawn_agent(
            "run",
            goal_of(n),
            "--yes",
            "--json",
            "--base-url",
            srv.url,
            cwd=repo,
            env={"AGENT_WORKTREE": "auto"},
        )
        for n in names
    ]
    codes = [a.wait(timeout=120) for a in agents]
    assert codes == [0, 0, 0], [a.stdout + a.stderr for a in agents]
    moved = [any("worktree of its own" in t for t in notices(a.stdout)) for a in agents]
    assert sorted(moved) == [False, True, True]
    for agent, name in zip(agents, names, strict=True):
        done = run_done(agent.stdout)
        assert done["status"] == "verified"
        assert name in branch_files(repo, done["branch"])
    assert not (repo / ".agent" / "run.lock").exists()


@pytest.mark.slow
def test_clean_leaves_a_worktree_run_that_starts_after_it_looked(
    spawn_agent, fake_server, agent_in_process, tmp_path, monkeypatch
):
    """`agent clean` looks at what is live first; a run that starts right after holds its own
    lock, its tree and branch made and nothing saved yet (its plan is asked for, and waits):
    clean leaves all of it, saying why, and the run goes on to the end."""
    from agent_cli.cli.commands import runs_commands
    from agent_cli.workspace.lock import live_holder

    repo = repo_with(tmp_path / "repo")
    planning = threading.Event()
    route = ByGoal({goal_of("iota.txt"): creates("iota.txt")})
    srv = fake_server(lambda body: (planning.wait(60), route(body))[1])
    looked = runs_commands._live
    runs: list = []

    def look_then_a_run_starts(place):
        seen = looked(place)
        runs.append(
            spawn_agent(
                "run", goal_of("iota.txt"), "--worktree", "--yes", "--json",
                "--base-url", srv.url, cwd=repo,
            )
        )  # fmt: skip
        wait_for(lambda: srv.chat_requests, 60, "the new run to ask for its plan")
        return seen

    monkeypatch.setattr(runs_commands, "_live", look_then_a_run_starts)
    cleaned = agent_in_process("clean", "--branches", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    ids = [p.name for p in (repo / ".agent" / "runs").iterdir()]
    assert len(ids) == 1, cleaned.stdout  # its folder, not removed
    run_id = ids[0]
    tree, folder = repo / ".agent" / "worktrees" / run_id, repo / ".agent" / "runs" / run_id
    pid = runs[0].pid
    assert cleaned.stdout.splitlines() == [
        f"kept {tree}: run {run_id} is in progress (pid {pid})",
        f"kept {folder}: run {run_id} is in progress (pid {pid})",
    ]
    assert worktrees(repo) == [str(repo), str(tree)]
    assert (live_holder(folder / "run.lock") or {}).get("run_id") == run_id
    planning.set()
    assert runs[0].wait(timeout=120) == 0, runs[0].stdout + runs[0].stderr
    assert run_done(runs[0].stdout)["status"] == "verified"
    assert "iota.txt" in branch_files(repo, f"agent/{run_id}")


def test_without_auto_the_second_run_still_refuses(agent_in_process, tmp_path: Path):
    repo = repo_with(tmp_path / "repo")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom agent_cli.workspace.lock import RunLock\n"
            "RunLock(sys.argv[1]).acquire()\nprint('locked', flush=True)\ntime.sleep(60)",
            str(repo / ".agent" / "run.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        proc = agent_in_process(
            "run", "x", "--yes", "--base-url", "http://127.0.0.1:9/v1", cwd=repo
        )
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 1 and "another agent run" in proc.stderr
    assert not (repo / ".agent" / "worktrees").exists()


def test_resuming_a_worktree_run_whose_tree_was_detached_names_the_tree_and_the_branch(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "delta.txt")
    git(tree, "checkout", "-q", "--detach")  # the user looks around in the run's tree
    again = agent_in_process(
        "run", "--resume", "--run-id", run_id, "--yes", "--base-url", "http://127.0.0.1:9", cwd=repo
    )
    said = again.stderr.strip()
    assert again.returncode != 0 and len(said.splitlines()) == 1, said
    assert str(tree) in said and f"git -C {tree} switch agent/{run_id}" in said, said
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == "HEAD"  # left as it was


def test_resuming_a_worktree_run_whose_branch_was_deleted_says_so_and_changes_nothing(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "zeta.txt")
    git(repo, "worktree", "remove", "--force", str(tree))  # the user throws the run away
    git(repo, "branch", "-m", f"agent/{run_id}", "kept-zeta")  # and keeps its branch by a name
    again = agent_in_process(
        "run", "--resume", "--run-id", run_id, "--yes", "--base-url", "http://127.0.0.1:9", cwd=repo
    )
    said = again.stderr.strip()
    assert again.returncode == 1 and len(said.splitlines()) == 1, said
    assert f"the run's branch agent/{run_id} no longer exists (deleted or renamed)" in said, said
    assert f"git branch -m NAME agent/{run_id}" in said and "invalid reference" not in said, said
    assert worktrees(repo) == [str(repo)] and not tree.exists()
    assert git(repo, "branch", "--list", "kept-zeta").strip() == "kept-zeta"


@pytest.mark.parametrize("where", ["worktree", "checkout"])
def test_resuming_a_run_whose_branch_was_renamed_under_its_tree_says_so_first(
    agent_in_process, fake_server, tmp_path, where
):
    """The tree is still there, on the branch's new name, with the run's own rejected attempt
    in it: the missing branch is said, not that attempt as changes of the user's."""
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(rejected("theta.txt"))
    flags = ["--worktree"] if where == "worktree" else []
    first = agent_in_process(
        "run", goal_of("theta.txt"), *flags, "--yes", "--json", "--base-url", srv.url, cwd=repo
    )
    assert first.returncode == 3, first.stdout + first.stderr
    run_id = run_done(first.stdout)["run_id"]
    tree = repo / ".agent" / "worktrees" / run_id if where == "worktree" else repo
    git(repo, "branch", "-m", f"agent/{run_id}", "kept-theta")  # renamed in its tree too
    for extra in ([], ["--allow-dirty"]):
        again = agent_in_process(
            "run", "--resume", "--run-id", run_id, *extra, "--yes",
            "--base-url", "http://127.0.0.1:9", cwd=repo,
        )  # fmt: skip
        said = again.stderr.strip()
        assert again.returncode == 1 and len(said.splitlines()) == 1, said
        assert f"the run's branch agent/{run_id} no longer exists (deleted or renamed)" in said
        assert f"git branch -m NAME agent/{run_id}" in said and "changes made since" not in said
        assert git(tree, "branch", "--show-current").strip() == "kept-theta"
        assert status(tree) == "?? not-theta.txt\n"  # nothing was changed


def test_a_worktree_run_resumes_in_its_tree_after_the_checkout_was_renamed(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    _, run_id, _ = rejected_worktree_run(agent_in_process, fake_server, repo, "eta.txt")
    moved = repo.rename(tmp_path / "renamed")  # the user renames the project's folder
    rest = fake_server(hinted("eta.txt"))
    again = resume_hinted(agent_in_process, rest.url, run_id, moved)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not repo.exists()  # nothing made again where the checkout was
    assert not any("made again" in t for t in notices(again.stdout))  # the tree moved along
    files = branch_files(moved, f"agent/{run_id}")
    assert "eta.txt" in files and "not-eta.txt" in files  # the rejected attempt's file was there
    assert worktrees(moved) == [str(moved)]  # verified: its tree is removed
    rewound = agent_in_process("rewind", run_id, "--yes", cwd=moved)
    assert rewound.returncode == 0, rewound.stderr


def test_a_kept_worktree_is_listed_where_it_is_after_the_checkout_was_moved(
    agent_in_process, fake_server, tmp_path
):
    """git's own record still names the tree where the checkout was (until a resume, rewind or
    clean of the run tells git): `agent runs` finds it where it went, and changes nothing."""
    repo = repo_with(tmp_path / "repo")
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "eta.txt")
    moved = repo.rename(tmp_path / "moved")
    now = moved / ".agent" / "worktrees" / run_id
    listed = agent_in_process("runs", "--json", cwd=moved)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["run_id"], row["worktree"]) == (run_id, str(now))
    assert worktrees(moved) == [str(moved), str(tree)]  # git is not told by a listing
    asked = subprocess.run(["git", "status"], cwd=now, capture_output=True, text=True)
    assert "not a git repository" in asked.stderr  # nor git in the tree: its links are stale


def test_resuming_a_moved_worktree_git_has_forgotten_names_git_worktree_repair(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    _, run_id, _ = rejected_worktree_run(agent_in_process, fake_server, repo, "eta.txt")
    moved = repo.rename(tmp_path / "moved")
    git(moved, "worktree", "prune")  # git forgets the tree it no longer finds where it was
    tree = moved / ".agent" / "worktrees" / run_id
    again = agent_in_process(
        "run", "--resume", "--run-id", run_id, "--yes", "--base-url", "http://127.0.0.1:9",
        cwd=moved,
    )  # fmt: skip
    said = again.stderr.strip()
    assert again.returncode == 1 and len(said.splitlines()) == 1, said
    assert f"the run's worktree {tree} is there, but git no longer knows it" in said, said
    assert "`git worktree repair`" in said and f"made again from agent/{run_id}" in said, said
    assert worktrees(moved) == [str(moved)]  # nothing was changed
    assert (tree / "not-eta.txt").read_text() == "wrong\n"


def test_a_resume_makes_the_worktree_again_in_the_folder_the_user_emptied(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "eta.txt")
    shutil.rmtree(tree)
    tree.mkdir()  # emptied by hand: git still lists the tree there, as prunable
    rest = fake_server(hinted("eta.txt"))
    again = resume_hinted(agent_in_process, rest.url, run_id, repo)
    assert again.returncode == 0, again.stdout + again.stderr
    assert any(f"worktree {tree} is made again" in t for t in notices(again.stdout))
    assert "eta.txt" in branch_files(repo, f"agent/{run_id}")
    assert worktrees(repo) == [str(repo)]  # verified: its tree is removed


def test_a_resume_refuses_a_worktree_folder_the_users_files_replaced(
    agent_in_process, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "my repo")  # a space: the command it suggests quotes the path
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "eta.txt")
    shutil.rmtree(tree)
    tree.mkdir()
    (tree / "mine.txt").write_text("the user's own\n")
    listed = git(repo, "worktree", "list", "--porcelain")
    again = agent_in_process(
        "run", "--resume", "--run-id", run_id, "--yes", "--base-url", "http://127.0.0.1:9",
        cwd=repo,
    )  # fmt: skip
    said = again.stderr.strip()
    assert again.returncode == 1 and len(said.splitlines()) == 1, said
    assert f"the run's worktree {tree} holds files but is no longer a git work tree" in said
    assert "nothing was changed" in said and f"made again from agent/{run_id}" in said, said
    command = said.split("move it aside (", 1)[1].split(";", 1)[0]
    assert shlex.split(command) == ["mv", str(tree), "ELSEWHERE"]
    assert git(repo, "worktree", "list", "--porcelain") == listed
    assert [p.name for p in tree.iterdir()] == ["mine.txt"]
    assert state(repo, run_id)["status"] == "escalated"


def test_ctrl_c_while_a_verified_run_writes_long_term_memory_keeps_its_outcome(
    spawn_agent, fake_server, tmp_path
):
    """Ctrl-C once every task is verified and committed, while what the run learned waits to
    be written (another process holds the store's write lock): the rest of the writing is
    skipped, and the run ends verified (exit 0), its run_end hook run, its worktree removed."""
    repo = repo_with(tmp_path / "repo")
    ended = tmp_path / "run_end.json"
    hook = [sys.executable, "-c", f"import pathlib, sys; pathlib.Path({str(ended)!r}).write_text(sys.stdin.read())"]  # fmt: skip
    rc = tmp_path / "agentrc"
    rc.write_text(f"[[hooks.run_end]]\ncommand = {json.dumps(hook)}\n")
    steps = creates("a.txt")
    steps[-1] = {**steps[-1], "delay": 0.5}  # the facts' answer: time to take the lock first
    srv = fake_server(steps)
    agent = spawn_agent(
        "run", "--worktree", goal_of("a.txt"), "--yes", "--json", "--base-url", srv.url,
        cwd=repo, env={"AGENT_RC": str(rc)},
    )  # fmt: skip
    wait_for(lambda: len(srv.chat_requests) == 4, timeout=60, what="the request for facts")
    lock = repo / ".agent" / "chroma" / "write.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another run writing long-term memory
        (trajectory,) = (repo / ".agent" / "runs").glob("*/trajectory.jsonl")
        taken = '"type": "facts"'  # the trajectory's record of the facts the model gave
        wait_for(lambda: taken in trajectory.read_text(), timeout=30, what="the facts taken")
        time.sleep(0.3)  # the run waits for the lock, to write what it learned
        os.kill(agent.pid, signal.SIGINT)
        assert agent.wait(timeout=30) == 0, agent.stdout + agent.stderr
    finally:
        os.close(fd)
    done = run_done(agent.stdout)
    assert done["status"] == "verified" and done["tasks"][0]["status"] == "verified"
    assert any(
        "memory was skipped; the run's outcome stands (verified)" in t
        for t in notices(agent.stdout)
    )
    assert json.loads(ended.read_text())["result"]["status"] == "verified"
    assert "a.txt" in branch_files(repo, done["branch"])
    assert worktrees(repo) == [str(repo)]  # a finished run's worktree is removed
