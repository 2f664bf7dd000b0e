"""A state.json edited behind the run's back is refused, never followed (issue 21, class 7).

Real runs over the loopback server in a real git repository; the state file is then edited
the way a command (or a person) could, and `--resume` must refuse it with a clear error.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from agent.test_loop import run_in_process
from agent_cli.agent.run.store import RunStore
from agent_cli.core.errors import AgentError, StorageError
from agent_cli.llm.fake.server import FakeOpenAIServer
from conftest import git
from reliability.relkit import branch, finish, head, make_done, plan, repo_with, task

KEEP = {"tool": "revise_plan", "args": {"keep": True}}
TWO = task("Create two.txt", "test -f two.txt")


@pytest.fixture(scope="module")
def rejected_run(tmp_path_factory) -> tuple[Path, str]:
    """A repository where a run verified its first task and had its second rejected, made
    once: every test edits a copy of it (the run is most of each test's time otherwise)."""
    base = tmp_path_factory.mktemp("rejected-run")
    repo = repo_with(base / "repo")
    replies = [
        plan(task(), TWO),
        make_done(),
        finish(),
        KEEP,
        make_done("other.txt"),
        finish(),
        make_done("other.txt", "again\n"),
        finish(),
    ]
    with pytest.MonkeyPatch.context() as env, FakeOpenAIServer(replies) as srv:
        env.setenv("XDG_CACHE_HOME", str(base / "user-cache"))  # not the first test's own
        ran = run_in_process(repo, srv.url, "Create done.txt and two.txt")
    assert ran.code == 3
    return repo, ran.of("run_done")[0]["run_id"]


@pytest.fixture
def rejected_second_task(rejected_run, tmp_path) -> tuple[Path, Path, dict]:
    """A copy of that run's repository in this test's tmp_path, and its state file."""
    made, run_id = rejected_run
    repo = tmp_path / "repo"
    shutil.copytree(made, repo, symlinks=True)
    path = repo / ".agent" / "runs" / run_id / "state.json"
    data = json.loads(path.read_text())
    assert [t["status"] for t in data["agent_state"]["plan"]] == ["verified", "rejected"]
    return repo, path, data


@pytest.mark.parametrize("commit", ["0" * 40, "base", "--output=/tmp/x"])
def test_a_task_marked_verified_without_the_runs_commit_is_refused_on_resume(
    rejected_second_task, commit
):
    repo, path, data = rejected_second_task
    if commit == "base":  # a real commit on the run's branch, but not one the run made
        commit = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    data["agent_state"]["plan"][1].update(status="verified", commit=commit)
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError, match="task 2 is verified by commit .* not a commit of this"):
        run_in_process(repo, "http://127.0.0.1:9", None)  # no request is ever made


def test_a_state_naming_another_branch_or_run_is_refused_and_main_is_untouched(
    rejected_second_task, tmp_path
):
    repo, path, data = rejected_second_task
    main_before = head(repo) if branch(repo) == "main" else None
    path.write_text(json.dumps(data | {"branch": "main"}))
    with pytest.raises(StorageError, match="branch: 'main' is not the run's own branch"):
        run_in_process(repo, "http://127.0.0.1:9", None)
    path.write_text(json.dumps(data | {"run_id": "../../../outside-run"}))
    with pytest.raises(AgentError, match="no unfinished run"):  # listed as unreadable
        run_in_process(repo, "http://127.0.0.1:9", None)
    with pytest.raises(StorageError, match="run_id: .* is not the run of its directory"):
        RunStore(repo / ".agent").load(path.parent.name)
    assert not (tmp_path / "outside-run").exists()
    assert not list(tmp_path.rglob("outside-run"))
    if main_before is not None:
        assert head(repo) == main_before


def test_a_run_id_that_is_not_one_path_component_is_refused(tmp_path):
    store = RunStore(tmp_path / ".agent")
    for bad in ("../../../outside-run", "a/b", "", ".hidden", "x" * 65):
        with pytest.raises(AgentError, match="is not a run id"):
            store.target(bad)
        with pytest.raises(AgentError, match="is not a run id"):
            store.load(bad)


@pytest.mark.parametrize("content", ["[]", '{"status": "running"}', '"text"', "[" * 100_000])
def test_a_state_file_of_any_shape_is_listed_as_unreadable_and_refused_on_load(tmp_path, content):
    store = RunStore(tmp_path)
    run_dir = store.run_dir("20250101-000000-aaaa")
    run_dir.mkdir(parents=True)
    (run_dir / "state.json").write_text(content)
    assert store.list() == [{"run_id": "20250101-000000-aaaa", "status": "unreadable", "goal": ""}]
    assert store.latest_unfinished() is None
    with pytest.raises(StorageError, match="state.json cannot be read"):
        store.load("20250101-000000-aaaa")


WORKING_MEMORY_EDITS = {
    "items not a list": lambda m: m.update(items="x"),
    "an item not an object": lambda m: m.update(items=[5]),
    "a cost in words": lambda m: m["items"][0].update(cost="x"),
    "an id of null": lambda m: m["items"][0].update(id=None),
    "an unknown kind": lambda m: m["items"][0].update(kind="bogus"),
    "a step in words": lambda m: m.update(step="x"),
    "a cold list of one letter": lambda m: m.update(cold_list="x"),
    "a negative cost": lambda m: m["items"][0].update(cost=-500),
    "a negative step": lambda m: m.update(step=-1),
}


@pytest.mark.parametrize("edit", WORKING_MEMORY_EDITS.values(), ids=WORKING_MEMORY_EDITS.keys())
def test_working_memory_edited_by_hand_is_one_clear_error_for_show_and_resume(
    rejected_second_task, tmp_path, monkeypatch, edit
):
    from typer.testing import CliRunner

    from agent_cli.cli.app import app

    repo, path, data = rejected_second_task
    assert data["memory"]["items"]
    edit(data["memory"])
    path.write_text(json.dumps(data))
    monkeypatch.setenv("AGENT_RC", os.devnull)  # no user settings
    monkeypatch.setenv("HOME", str(tmp_path))
    shown = CliRunner().invoke(app, ["memory", "show", "--repo", str(repo)], prog_name="agent")
    said = shown.output + str(shown.exception or "")
    assert shown.exit_code == 1, said
    assert "working memory cannot be read" in said and "internal error" not in said, said
    assert said.count("\n") <= 1, said
    with pytest.raises(StorageError, match="working memory"):
        run_in_process(repo, "http://127.0.0.1:9", None)


def test_a_truncated_or_fifo_state_file_is_named_once_with_why_it_cannot_be_read(tmp_path):
    store = RunStore(tmp_path)
    run_dir = store.run_dir("20250101-000000-aaaa")
    run_dir.mkdir(parents=True)
    path = run_dir / "state.json"
    path.write_text('{"run_id": "20250101-000000-aaaa", "goal": "Create do')
    with pytest.raises(StorageError) as refused:
        store.load("20250101-000000-aaaa")
    said = refused.value.one_line()
    assert said.count(str(path)) == 1, said
    assert "Unterminated string starting at char 43" in said and " at at " not in said, said
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(StorageError) as refused:
        store.load("20250101-000000-aaaa")
    said = refused.value.one_line()
    assert said.count(str(path)) == 1 and "cannot be read: is a FIFO" in said, said


@pytest.mark.parametrize("status", [None, 5, ["verified"]])
def test_a_state_whose_status_is_not_a_word_is_listed_as_unreadable(tmp_path, status):
    store = RunStore(tmp_path)
    run_id = "20250101-000000-aaaa"
    store.run_dir(run_id).mkdir(parents=True)
    state = {"run_id": run_id, "goal": "g", "status": status}
    (store.run_dir(run_id) / "state.json").write_text(json.dumps(state))
    assert store.list()[0]["status"] == "unreadable"


def test_a_commit_a_command_made_with_the_runs_trailer_is_not_taken_as_a_task_verified(
    rejected_second_task, fake_server
):
    """A process that died while task 2 ran (its state saved at the attempt's start) and a
    commit on the branch with the run's trailer that the harness did not make (a command's
    `git commit`): the resume does task 2 again instead of calling it verified by that commit."""
    repo, path, data = rejected_second_task
    run_id = data["run_id"]
    data["agent_state"]["plan"][1].update(status="running", attempts=1, max_attempts=2)
    path.write_text(json.dumps(data))
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", f"Create two.txt\n\nAgent-Run: {run_id}")
    forged = head(repo)
    srv = fake_server([make_done("two.txt"), finish(), finish()])
    ran = run_in_process(repo, srv.url, None)
    assert "not done again" not in ran.text
    second = json.loads(path.read_text())["agent_state"]["plan"][1]
    assert second["status"] == "verified" and second["commit"] not in (None, forged)
    assert (repo / "two.txt").is_file()


STATE_NUMBERS = {
    "a negative cost": lambda d: d["usage"].update(cost_usd=-100),
    "negative prompt tokens": lambda d: d["usage"].update(prompt_tokens=-5),
    "a negative step": lambda d: d["agent_state"].update(step=-3),
    "negative attempts": lambda d: d["agent_state"]["plan"][1].update(attempts=-2),
    "no attempt allowed": lambda d: d["agent_state"]["plan"][1].update(max_attempts=0),
    "a negative task to restore": lambda d: d["agent_state"]["plan"][1].update(restores=-1),
}


@pytest.mark.parametrize("edit", STATE_NUMBERS.values(), ids=STATE_NUMBERS.keys())
def test_a_count_or_cost_out_of_range_is_refused_on_resume(rejected_second_task, edit):
    """A negative cost would give a resumed run money it did not have; a negative step or attempt count would let it run on past its
    limits. Such a file is refused, as any state.json that is not the run's own."""
    repo, path, data = rejected_second_task
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(AgentError, match="cannot be"):
        run_in_process(repo, "http://127.0.0.1:9", None)  # no request is ever made
