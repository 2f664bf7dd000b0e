"""GitRepo against real repositories made with the git command line in tmp dirs."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.exclude import exclude_state_dir
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace


def git(repo: Path, *args: str, check: bool = True) -> str:
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def make_repo(path: Path, commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test User")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    if commit:
        (path / "a.txt").write_text("one\n")
        (path / "b.txt").write_text("bee\n")
        (path / ".gitignore").write_text("*.log\n")
        git(path, "add", ".")
        git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def repo(tmp_path) -> Path:
    return make_repo(tmp_path / "repo")


def status(repo: Path) -> str:
    return git(repo, "status", "--porcelain=v1", "--untracked-files=all")


# --- opening and preflight -------------------------------------------------------------------


def test_a_directory_that_is_not_a_repository_is_a_git_error(tmp_path):
    with pytest.raises(GitError) as err:
        GitRepo(tmp_path)
    assert "not inside a git repository" in err.value.message
    assert err.value.hint == "run inside a git repository or pass --repo DIR"
    with pytest.raises(GitError, match="does not exist"):
        GitRepo(tmp_path / "missing")


def test_the_root_is_found_from_a_subdirectory(repo):
    (repo / "sub").mkdir()
    assert GitRepo(repo / "sub").root == repo.resolve()


def test_a_clean_repository_passes_preflight_with_nothing_protected(repo):
    assert GitRepo(repo).preflight(allow_dirty=False) == set()


def test_a_repository_without_commits_is_refused(tmp_path):
    empty = make_repo(tmp_path / "empty", commit=False)
    with pytest.raises(GitError, match="no commits yet") as err:
        GitRepo(empty).preflight(allow_dirty=True)
    assert "first commit" in err.value.hint


def test_a_detached_head_is_refused(repo):
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(GitError, match="detached") as err:
        GitRepo(repo).preflight(allow_dirty=True)
    assert "git switch" in err.value.hint


def test_a_detached_resumed_tree_names_a_switch_that_a_shell_runs_as_it_reads(tmp_path):
    """The way out names the tree: a path with a space stays one word when copied."""
    repo = make_repo(tmp_path / "my review tree")
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(GitError, match="detached") as err:
        GitRepo(repo).preflight(allow_dirty=True, resuming="main")
    command = err.value.hint.split("(", 1)[1].split(")", 1)[0]
    assert shlex.split(command) == ["git", "-C", str(repo.resolve()), "switch", "main"]


def test_a_repository_whose_path_is_not_utf8_is_refused_before_anything_is_made(tmp_path):
    """A run's record names its repository, in UTF-8: a path that is not UTF-8 text is refused
    in one line before the run makes its branch, not met as an internal error after."""
    repo = make_repo(Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname")))
    with pytest.raises(GitError, match="not valid UTF-8") as err:
        GitRepo(repo).preflight(allow_dirty=False)
    assert "rename" in err.value.hint


def _conflict(repo: Path) -> None:
    """Two branches that change the same line of a.txt differently."""
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "a.txt").write_text("other\n")
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("main\n")
    git(repo, "commit", "-q", "-am", "main")


def test_a_merge_in_progress_is_refused(repo):
    _conflict(repo)
    git(repo, "merge", "other", check=False)
    with pytest.raises(GitError, match="a merge is in progress") as err:
        GitRepo(repo).preflight(allow_dirty=True)
    assert "git merge --abort" in err.value.hint


def test_a_rebase_in_progress_is_refused(repo):
    _conflict(repo)
    git(repo, "rebase", "other", check=False)
    with pytest.raises(GitError, match="a rebase is in progress") as err:
        GitRepo(repo).preflight(allow_dirty=True)
    assert "git rebase --abort" in err.value.hint


def test_a_cherry_pick_in_progress_is_refused(repo):
    _conflict(repo)
    git(repo, "cherry-pick", "other", check=False)
    with pytest.raises(GitError, match="a cherry-pick is in progress"):
        GitRepo(repo).preflight(allow_dirty=True)


def test_unresolved_conflicts_without_a_merge_marker_are_refused(repo):
    _conflict(repo)
    git(repo, "merge", "other", check=False)
    (repo / ".git" / "MERGE_HEAD").unlink()
    with pytest.raises(GitError, match=r"unresolved conflicts \(a.txt\)"):
        GitRepo(repo).preflight(allow_dirty=True)


def test_uncommitted_changes_are_refused_unless_allowed(repo):
    (repo / "a.txt").write_text("changed\n")
    with pytest.raises(GitError, match=r"uncommitted changes \(a.txt\)") as err:
        GitRepo(repo).preflight(allow_dirty=False)
    assert "--allow-dirty" in err.value.hint and "commit or stash" in err.value.hint


def test_allowed_dirty_work_is_returned_as_the_protected_set(repo):
    (repo / "a.txt").write_text("modified\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "new dir").mkdir()
    (repo / "new dir" / "untracked é.txt").write_text("x\n")
    (repo / "debug.log").write_text("ignored\n")
    git(repo, "mv", "b.txt", "renamed.txt")
    protected = GitRepo(repo).preflight(allow_dirty=True)
    assert protected == {"a.txt", "staged.txt", "new dir/untracked é.txt", "renamed.txt", "b.txt"}


def test_allowed_dirty_work_in_a_file_whose_name_is_not_utf8_is_refused_in_one_line(repo):
    (repo / os.fsdecode(b"caf\xe9.txt")).write_text("mine\n")
    git_repo = GitRepo(repo)
    ws = RepoWorkspace(git_repo, CommandRunner(repo, [git_repo.git_dir], timeout_s=30, env={}))
    with pytest.raises(GitError, match=r"not UTF-8 text \(caf\\xe9.txt\)") as err:
        ws.preflight(allow_dirty=True)  # the run's record could not keep the path
    assert "--worktree" in err.value.hint
    assert (repo / os.fsdecode(b"caf\xe9.txt")).read_text() == "mine\n"


# --- exclude and branches ----------------------------------------------------------------------


def test_exclude_hides_the_state_directory_once(repo):
    (repo / ".agent").mkdir()
    (repo / ".agent" / "state.db").write_text("x")
    gr = GitRepo(repo)
    assert gr.exclude(".agent/") is True
    assert gr.exclude(".agent/") is False
    lines = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert lines.count(".agent/") == 1
    assert status(repo) == ""
    assert gr.preflight(allow_dirty=False) == set()


def test_exclude_keeps_the_users_lines_in_another_encoding_byte_for_byte(repo):
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_bytes(b"caf\xe9.log\n")  # a pattern for a file named in Latin-1
    assert GitRepo(repo).exclude() is True
    assert exclude.read_bytes() == b"caf\xe9.log\n.agent/\n"
    assert GitRepo(repo).exclude() is False


def test_an_exclude_file_that_cannot_be_written_is_a_git_error_naming_it(repo):
    exclude = repo / ".git" / "info" / "exclude"
    exclude.unlink()
    exclude.mkdir()
    with pytest.raises(GitError, match=r"cannot add \.agent/ to .*exclude: Is a directory"):
        GitRepo(repo).exclude()


def test_an_exclude_file_shared_by_a_symlink_is_written_through_and_stays_a_link(repo, tmp_path):
    shared = tmp_path / "shared-exclude"
    shared.write_text("*.swp\n")
    exclude = repo / ".git" / "info" / "exclude"
    exclude.unlink()
    exclude.symlink_to(shared)
    assert GitRepo(repo).exclude() is True
    assert exclude.is_symlink() and shared.read_text() == "*.swp\n.agent/\n"
    assert GitRepo(repo).exclude() is False
    shared.unlink()  # the link now dangles: refused, nothing created in its place
    with pytest.raises(GitError, match="symlink to .*shared-exclude, which does not exist"):
        GitRepo(repo).exclude()
    assert exclude.is_symlink() and not shared.exists()


def test_exclude_keeps_existing_lines_without_a_final_newline(repo):
    path = repo / ".git" / "info" / "exclude"
    path.write_text("# mine\n*.tmp")
    GitRepo(repo).exclude()
    assert path.read_text() == "# mine\n*.tmp\n.agent/\n"


def test_start_branch_moves_to_a_new_branch_keeping_uncommitted_work(repo):
    (repo / "a.txt").write_text("user work\n")
    (repo / "untracked.txt").write_text("mine\n")
    gr = GitRepo(repo)
    base = gr.head()
    gr.start_branch("agent/run-1")
    assert gr.current_branch() == "agent/run-1"
    assert gr.head() == base
    assert (repo / "a.txt").read_text() == "user work\n"
    assert (repo / "untracked.txt").read_text() == "mine\n"
    assert gr.branch_exists("agent/run-1") and gr.branch_exists("main")


def test_start_branch_refuses_an_existing_branch(repo):
    git(repo, "branch", "agent/run-1")
    with pytest.raises(GitError, match="branch agent/run-1 already exists") as err:
        GitRepo(repo).start_branch("agent/run-1")
    assert "--resume" in err.value.hint


def test_start_branch_refuses_an_invalid_name(repo):
    with pytest.raises(GitError, match="not a valid branch name"):
        GitRepo(repo).start_branch("bad..name")


def test_checkout_switches_and_refuses_unknown_branches(repo):
    gr = GitRepo(repo)
    gr.start_branch("agent/x")
    gr.checkout("main")
    assert gr.current_branch() == "main"
    with pytest.raises(GitError, match="there is no branch nope"):
        gr.checkout("nope")


def test_checkout_that_would_overwrite_work_is_a_git_error_not_a_traceback(repo):
    gr = GitRepo(repo)
    gr.start_branch("agent/x")
    (repo / "a.txt").write_text("agent\n")
    gr.commit_paths(["a.txt"], "agent change")
    gr.checkout("main")
    (repo / "a.txt").write_text("user edit\n")
    with pytest.raises(GitError, match="git checkout failed") as err:
        gr.checkout("agent/x")
    assert "commit or stash" in err.value.hint
    assert (repo / "a.txt").read_text() == "user edit\n"


def test_current_branch_is_none_when_detached_and_head_needs_a_commit(repo, tmp_path):
    git(repo, "checkout", "-q", "--detach")
    assert GitRepo(repo).current_branch() is None
    with pytest.raises(GitError, match="no commits"):
        GitRepo(make_repo(tmp_path / "empty", commit=False)).head()


# --- changed files and commits -----------------------------------------------------------------


def test_changed_files_lists_agent_changes_and_leaves_out_the_protected(repo):
    (repo / "a.txt").write_text("user\n")
    gr = GitRepo(repo)
    protected = gr.preflight(allow_dirty=True)
    (repo / "b.txt").unlink()
    (repo / "pkg").mkdir()
    (repo / "pkg" / "new.py").write_text("x = 1\n")
    (repo / "run.log").write_text("ignored\n")
    assert gr.changed_files(protected) == ["b.txt", "pkg/new.py"]
    assert gr.changed_files() == ["a.txt", "b.txt", "pkg/new.py"]


def test_a_file_written_outside_a_sparse_checkouts_cone_is_committed(repo):
    (repo / "src").mkdir()
    (repo / "src" / "m.py").write_text("m\n")
    git(repo, "add", "src")
    git(repo, "commit", "-q", "-m", "src")
    git(repo, "sparse-checkout", "set", "--cone", "src")
    (repo / "docs").mkdir()
    (repo / "docs" / "new.md").write_text("the task's file\n")
    gr = GitRepo(repo)
    assert "docs/new.md" in gr.diff()
    sha = gr.commit_paths(["docs/new.md"], "Agent: task 1")
    assert sha == gr.head()
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["docs/new.md"]
    assert status(repo) == ""


def test_commit_paths_commits_exactly_those_paths_including_deletions(repo):
    gr = GitRepo(repo)
    (repo / "a.txt").write_text("two\n")
    (repo / "b.txt").unlink()
    (repo / "new.txt").write_text("new\n")
    (repo / "other.txt").write_text("not asked for\n")
    sha = gr.commit_paths(["a.txt", "b.txt", "new.txt"], "Agent: task 1")
    assert sha == gr.head() and len(sha) == 40
    assert git(repo, "show", "--name-status", "--format=%s", "HEAD").split() == [
        "Agent:",
        "task",
        "1",
        "M",
        "a.txt",
        "D",
        "b.txt",
        "A",
        "new.txt",
    ]
    assert status(repo) == "?? other.txt\n"


def test_commit_paths_leaves_the_users_staged_and_dirty_work_untouched(repo):
    (repo / "b.txt").write_text("user staged\n")
    git(repo, "add", "b.txt")
    (repo / "user-new.txt").write_text("user staged new file\n")
    git(repo, "add", "user-new.txt")
    (repo / ".gitignore").write_text("*.log\nuser-unstaged\n")
    gr = GitRepo(repo)
    protected = gr.preflight(allow_dirty=True)
    (repo / "a.txt").write_text("agent\n")
    (repo / "agent.py").write_text("print('agent')\n")
    sha = gr.commit_paths(gr.changed_files(protected), "Agent work")
    committed = git(repo, "show", "--name-only", "--format=", sha).split()
    assert committed == ["a.txt", "agent.py"]
    assert git(repo, "diff", "--cached", "--name-only").split() == ["b.txt", "user-new.txt"]
    assert git(repo, "show", ":b.txt") == "user staged\n"
    assert (repo / ".gitignore").read_text() == "*.log\nuser-unstaged\n"
    assert sorted(status(repo).splitlines()) == [" M .gitignore", "A  user-new.txt", "M  b.txt"]


def test_commit_paths_with_nothing_changed_returns_none(repo):
    gr = GitRepo(repo)
    head = gr.head()
    assert gr.commit_paths([], "nothing") is None
    assert gr.commit_paths(["a.txt", "never-existed.txt"], "nothing") is None
    assert gr.head() == head


def test_commit_paths_treats_paths_literally(repo):
    gr = GitRepo(repo)
    (repo / "star*.txt").write_text("literal\n")
    (repo / "starry.txt").write_text("not this one\n")
    gr.commit_paths(["star*.txt"], "literal path")
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["star*.txt"]


def test_commit_without_an_identity_says_how_to_set_it(repo, tmp_path, monkeypatch):
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    git(repo, "config", "user.useConfigOnly", "true")
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in (
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EMAIL",
    ):
        monkeypatch.delenv(name, raising=False)
    (repo / "a.txt").write_text("change\n")
    with pytest.raises(GitError, match="git commit failed") as err:
        GitRepo(repo).commit_paths(["a.txt"], "msg")
    assert "git config user.name" in err.value.hint
    assert not list((repo / ".git").glob("agent-index-*")), "the temporary index is removed"


def test_the_repository_is_opened_and_checked_without_gitpython(repo):
    code = (
        "import sys; from agent_cli.workspace.git.repository import GitRepo; "
        f"g = GitRepo({str(repo)!r}); g.preflight(allow_dirty=True); g.list_files(); "
        "print(g.root, 'git' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(repo.resolve()), "False"]


def test_a_bare_repository_or_a_git_directory_is_refused(tmp_path, repo):
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "bare")], check=True)
    with pytest.raises(GitError, match="bare repository with no work tree"):
        GitRepo(tmp_path / "bare")
    with pytest.raises(GitError, match="inside a git directory, not a work tree"):
        GitRepo(repo / ".git")


def test_a_linked_worktree_is_its_own_root_and_shares_the_exclude_file(repo, tmp_path):
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    gr = GitRepo(tmp_path / "wt")
    assert gr.root == (tmp_path / "wt").resolve()
    (tmp_path / "wt" / "state").mkdir()
    assert gr.exclude_state(tmp_path / "wt" / "state") is True
    assert "state/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()


def test_exclude_state_adds_a_state_directory_inside_the_repo_only(repo, tmp_path):
    gr = GitRepo(repo)
    (repo / "var" / "agent").mkdir(parents=True)
    (repo / "var" / "agent" / "db").write_text("x")
    assert gr.exclude_state(repo / "var" / "agent") is True
    assert gr.exclude_state(repo / "var" / "agent") is False
    assert "var/agent/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert status(repo) == ""
    assert gr.exclude_state(tmp_path / "elsewhere") is False


def _exclude_state(root: Path, state_dir: Path) -> bool:
    return GitRepo(root).exclude_state(state_dir)


@pytest.mark.parametrize("exclude", [_exclude_state, exclude_state_dir])
def test_a_state_directory_that_is_the_users_own_link_is_excluded_as_the_link(
    exclude, repo, tmp_path
):
    """git sees a link as a file, which `.agent/` never matches: the link itself is excluded,
    anchored, once; a real state directory keeps the one line it had."""
    info = repo / ".git" / "info" / "exclude"
    info.write_text(".agent/\n")  # as an older version left it
    (repo / ".agent").mkdir()
    assert exclude(repo, repo / ".agent") is False  # a real directory: nothing more
    (repo / ".agent").rmdir()
    (tmp_path / "elsewhere").mkdir()
    (repo / ".agent").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "via").symlink_to(repo)  # the repository named through a link of its own
    assert status(repo) == "?? .agent\n"
    assert exclude(repo, tmp_path / "via" / ".agent") is True
    assert exclude(repo, repo / ".agent") is False
    assert info.read_text() == ".agent/\n/.agent\n"
    assert status(repo) == ""
    assert GitRepo(repo).preflight(allow_dirty=False) == set()


def test_a_state_link_to_a_folder_of_the_work_tree_excludes_both(repo):
    (repo / "kept" / "state").mkdir(parents=True)
    (repo / "kept" / "state" / "db").write_text("x")
    (repo / ".agent").symlink_to(repo / "kept" / "state")
    assert GitRepo(repo).exclude_state(repo / ".agent") is True
    assert (repo / ".git" / "info" / "exclude").read_text().splitlines()[-2:] == [
        "kept/state/",
        "/.agent",
    ]
    assert status(repo) == ""


def test_list_files_lists_tracked_and_untracked_but_not_ignored_or_deleted(repo):
    (repo / "new.py").write_text("x\n")
    (repo / "debug.log").write_text("ignored\n")
    (repo / "b.txt").unlink()
    assert GitRepo(repo).list_files() == [".gitignore", "a.txt", "new.py"]


def test_list_files_shows_a_name_that_is_not_utf8_escaped_so_the_plan_request_can_carry_it(repo):
    (Path(os.fsdecode(bytes(repo) + b"/caf\xe9.txt"))).write_bytes(b"x\n")
    names = GitRepo(repo).list_files()
    assert "caf\\xe9.txt" in names
    "\n".join(names).encode("utf-8")  # what the planner's request is made of


def test_diff_shows_changes_and_new_files_but_not_the_protected_ones(repo):
    (repo / "b.txt").write_text("user change\n")
    gr = GitRepo(repo)
    protected = gr.preflight(allow_dirty=True)
    (repo / "a.txt").write_text("agent change\n")
    (repo / "created.py").write_text("print('hi')\n")
    diff = gr.diff(protected)
    assert "+agent change" in diff and "+print('hi')" in diff and "created.py" in diff
    assert "user change" not in diff
    assert git(repo, "diff", "--cached", "--name-only") == "", "the real index is not touched"
    assert GitRepo(make_repo(repo.parent / "clean")).diff() == ""


def test_ensure_on_switches_to_the_runs_branch_when_needed(repo):
    gr = GitRepo(repo)
    gr.start_branch("agent/r1")
    gr.ensure_on("agent/r1")
    gr.checkout("main")
    (repo / "untracked-user.txt").write_text("mine\n")
    gr.ensure_on("agent/r1", {"untracked-user.txt"})
    assert gr.current_branch() == "agent/r1"
    assert (repo / "untracked-user.txt").read_text() == "mine\n"
    with pytest.raises(GitError, match="no longer exists"):
        gr.ensure_on("agent/gone")


def test_ensure_on_names_the_users_conflicting_work(repo):
    gr = GitRepo(repo)
    gr.start_branch("agent/r1")
    (repo / "a.txt").write_text("agent\n")
    gr.commit_paths(["a.txt"], "agent")
    gr.checkout("main")
    (repo / "a.txt").write_text("user\n")
    with pytest.raises(GitError) as err:
        gr.ensure_on("agent/r1", {"a.txt"})
    assert "your uncommitted changes (a.txt)" in err.value.hint
    assert gr.current_branch() == "main"


def test_a_files_blob_at_a_commit_is_asked_of_git_only_for_a_full_commit_id(repo, tmp_path):
    g = GitRepo(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    blob = git(repo, "rev-parse", "HEAD:a.txt").strip()
    assert g.blob_at(head, "a.txt") == blob and g.blob_at(head, "missing.md") is None
    # a commit read from a state file is never an option to git
    out = tmp_path / "written-by-git"
    assert g.blob_at(f"--output={out}", "a.txt") is None and not out.exists()
    assert g.blob_at("HEAD", "a.txt") is None
