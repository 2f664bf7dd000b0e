"""File names git gives that are not UTF-8 (as it gives them under `core.quotepath = false`):
a run that commits, shows, escalates or skips such a file ends as its tasks do, with every
`--json` line valid and every record on disk UTF-8, the name shown as `\\xNN`. A branch
named so, which GitPython cannot read, is refused before the plan."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from agent_cli.agent.ask.window import send
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunRecord, RunStore
from agent_cli.core import events
from agent_cli.core.errors import GitError
from agent_cli.core.models import Task
from agent_cli.core.text import readable_all
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.workspace.git.repository import GitRepo
from conftest import git
from reliability.relkit import GOAL, call, finish, make_done, plan, repo_with, task

LATIN1 = "caf\\xe9.txt"  # b"caf\xe9.txt" as the run shows it
# the model's command, or a failing check, makes a file named in Latin-1
MAKE_LATIN1 = 'sh -c \'touch "$(printf "caf\\351.txt")"\''
FAIL_LATIN1 = 'sh -c \'touch "$(printf "caf\\351.txt")"; exit 1\''


def _repo(tmp_path: Path) -> Path:
    repo = repo_with(tmp_path / "repo")
    git(repo, "config", "core.quotepath", "false")  # git's names as they are, unquoted
    return repo


def _events(stdout: str) -> list[dict]:
    """Every line of a `--json` run, each one JSON (a line that is not fails the test)."""
    return [json.loads(line) for line in stdout.splitlines()]


def _records(repo: Path) -> dict:
    """The run's state.json, its trajectory read line by line as UTF-8 JSON."""
    (run_dir,) = (repo / ".agent" / "runs").iterdir()
    for line in (run_dir / "trajectory.jsonl").read_bytes().decode("utf-8").splitlines():
        json.loads(line)
    return json.loads((run_dir / "state.json").read_bytes().decode("utf-8"))


def _committed(repo: Path) -> list[bytes]:
    """The names of the files the run's commits hold, as git has them."""
    out = subprocess.run(
        ["git", "log", "--name-only", "-z", "--format=", "main..HEAD"],
        cwd=repo,
        check=True,
        capture_output=True,
    ).stdout
    return [name.strip(b"\n") for name in out.split(b"\0") if name.strip()]


def test_a_verified_task_that_commits_a_file_named_in_latin1_ends_the_run_verified(
    agent_in_process, fake_server, tmp_path
):
    repo = _repo(tmp_path)
    srv = fake_server([plan(task()), call("run", cmd=MAKE_LATIN1), make_done(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = _events(proc.stdout)
    (done,) = [e for e in events if e["event"] == "task_done"]
    assert done["status"] == "verified" and LATIN1 in done["diff_stat"], done
    assert events[-1]["event"] == "run_done" and events[-1]["exit_code"] == 0
    assert b"caf\xe9.txt" in _committed(repo)
    assert _records(repo)["status"] == "verified"


def test_an_escalation_and_a_skip_that_leave_a_file_named_in_latin1_say_so_and_keep_it(
    agent_in_process, fake_server, tmp_path
):
    """The escalation (exit 3) and the skip name the file; the next task's commit leaves it
    out, as it leaves out every file a skipped task left."""
    repo = _repo(tmp_path)
    second = task("Create two.txt", "test -f two.txt")
    srv = fake_server(
        [plan(task(cmd=FAIL_LATIN1), second), make_done(), finish()] + [make_done(), finish()]
    )
    args = ("--yes", "--json", "--base-url", srv.url)
    proc = agent_in_process("run", GOAL, *args, cwd=repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    events = _events(proc.stdout)
    (escalated,) = [e for e in events if e["event"] == "escalated"]
    assert LATIN1 in escalated["diff_stat"], escalated
    assert events[-1]["event"] == "run_done" and events[-1]["exit_code"] == 3
    assert _records(repo)["status"] == "escalated"

    srv = fake_server([make_done("two.txt"), finish()])
    args = ("--yes", "--json", "--base-url", srv.url)
    proc = agent_in_process("run", "--resume", "--skip", *args, cwd=repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # a skipped task: 3
    events = _events(proc.stdout)
    (skipped,) = [e for e in events if e["event"] == "task_skipped"]
    assert LATIN1 in skipped["left_files"], skipped
    assert [e["status"] for e in events if e["event"] == "task_done"] == ["verified"]
    assert b"two.txt" in _committed(repo) and b"caf\xe9.txt" not in _committed(repo)
    state = _records(repo)
    assert LATIN1 in state["agent_state"]["plan"][0]["left_files"]


def test_code_git_ignores_named_in_latin1_fails_the_check_in_words_the_next_attempt_reads(
    agent_in_process, fake_server, tmp_path
):
    """`git status -z` names an ignored file as its bytes are: the check's reason that the
    pass needs it reaches working memory and the next attempt's request as `\\xNN`."""
    repo = repo_with(tmp_path / "repo", ignore=("ign*",))
    make = 'sh -c \'echo x > "$(printf "ign\\351.py")"\''
    check = f"{sys.executable} -c \"import os; assert os.path.exists(b'ign\\\\xe9.py')\""
    srv = fake_server([plan(task(cmd=check)), call("run", cmd=make), finish(), finish()])
    proc = agent_in_process("run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # rejected: the code is ignored
    reasons = [e["reason"] for e in _events(proc.stdout) if e["event"] == "verify"]
    assert "cannot hold: ign\\xe9.py" in reasons[0], reasons
    asked = [str(m.get("content")) for body in srv.chat_requests for m in body["messages"]]
    assert any("cannot hold: ign\\xe9.py" in text for text in asked)  # the second attempt


# -- where git's text enters events, errors and records -------------------------------------------

GIT_SAID = "caf\udce9.txt"  # git's b"caf\xe9.txt", decoded as the harness decodes git's output


def test_every_event_carries_a_name_git_gave_as_utf8_text_given_or_assigned():
    assert all(issubclass(kind, events.EventModel) for kind in typing.get_args(events.Event))
    done = events.TaskDone(
        index=0,
        status="verified",
        attempts=1,
        diff_stat=f" {GIT_SAID} | 0",
        check_changed=[GIT_SAID],
    )
    skipped = events.TaskSkipped(index=0, goal="g", left_files=[GIT_SAID])
    revised = events.PlanRevised(
        start=0, reason="r", old=[{"goal": "g", "left_files": [GIT_SAID]}], new=[]
    )
    done.summary = f"wrote {GIT_SAID}"
    assert done.diff_stat == f" {LATIN1} | 0" and done.check_changed == [LATIN1]
    assert done.summary == f"wrote {LATIN1}" and skipped.left_files == [LATIN1]
    assert revised.old[0]["left_files"] == [LATIN1]
    for event in (done, skipped, revised):
        assert json.loads(event.model_dump_json()) == event.model_dump()  # --json's line


def test_an_error_naming_a_file_git_gave_says_it_as_utf8_text():
    error = GitError(f"the work tree has uncommitted changes ({GIT_SAID})", f"see {GIT_SAID}")
    assert error.message == f"the work tree has uncommitted changes ({LATIN1})"
    assert error.one_line().encode("utf-8").decode() == error.one_line()
    assert LATIN1 in error.hint


def test_the_run_record_and_its_trajectory_are_utf8_whatever_names_they_hold(tmp_path):
    store = RunStore(tmp_path)
    state = AgentState(goal="g", dropped={GIT_SAID: ""})
    state.plan.append(Task(goal="t", left_files=[GIT_SAID], check_changed=[GIT_SAID]))
    record = RunRecord(run_id="r1", goal="g", branch="agent/r1", agent_state=state.to_dict())
    store.save(record)
    store.log("r1", {"type": "verify", "files": [GIT_SAID], "where": Path(GIT_SAID)})
    saved = json.loads((store.run_dir("r1") / "state.json").read_bytes().decode("utf-8"))
    assert saved["agent_state"]["plan"][0]["left_files"] == [LATIN1]
    assert saved["agent_state"]["plan"][0]["check_changed"] == [LATIN1]
    (line,) = (store.run_dir("r1") / "trajectory.jsonl").read_bytes().decode("utf-8").splitlines()
    assert json.loads(line)["files"] == [LATIN1] and json.loads(line)["where"] == LATIN1


def test_text_values_at_any_depth_are_made_readable():
    value = {GIT_SAID: [GIT_SAID, (GIT_SAID, 1)], "n": None, "ok": "café"}
    assert readable_all(value) == {LATIN1: [LATIN1, (LATIN1, 1)], "n": None, "ok": "café"}


# -- branch names ---------------------------------------------------------------------------------


def test_a_checked_out_branch_named_in_latin1_is_refused_in_the_preflight(tmp_path):
    repo = repo_with(tmp_path / "repo")
    subprocess.run(["git", "checkout", "-q", "-b", b"caf\xe9"], cwd=repo, check=True)
    main = GitRepo(repo)
    with pytest.raises(GitError) as refused:
        main.check_state()
    main.close()
    assert "the checked-out branch caf\\xe9 is not UTF-8 text" in refused.value.message
    assert "git branch -m" in refused.value.hint


def test_a_packed_branch_named_in_latin1_is_refused_before_the_plan_and_by_gitpython(
    agent_in_process, fake_server, tmp_path
):
    """GitPython reads `packed-refs` (where `git gc` puts every ref) as UTF-8: it could read
    no branch and no commit, which ended a run after its plan with an internal error."""
    repo = repo_with(tmp_path / "repo")
    subprocess.run(["git", "branch", b"caf\xe9"], cwd=repo, check=True)
    git(repo, "pack-refs", "--all")
    srv = fake_server([plan(task())])
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=repo)
    assert proc.returncode == 1 and srv.chat_requests == [], proc.stdout + proc.stderr
    (said,) = proc.stderr.strip().splitlines()
    assert "a ref whose name is not UTF-8 text (refs/heads/caf\\xe9)" in said, said
    main = GitRepo(repo)
    with pytest.raises(GitError) as through_gitpython:
        main.head()
    main.close()
    assert "refs/heads/caf\\xe9" in through_gitpython.value.message


def test_a_request_carrying_a_name_git_gave_is_sent_as_utf8_text(fake_server):
    """Every request goes through `window.send`: a check's reason naming an ignored file that
    git lists as its bytes are (`status -z`), a diff, reach the model as `\\xNN`."""
    srv = fake_server([{"content": "ok"}])
    model = OpenAIChat(model="fake-model", base_url=srv.url, api_key=None, backoff_s=0.01)
    logged: list[dict] = []
    messages = [{"role": "user", "content": f"the check passes only with {GIT_SAID}"}]
    assert send(model, messages, None, None, log=logged.append).content == "ok"
    (sent,) = srv.chat_requests
    assert sent["messages"][0]["content"] == f"the check passes only with {LATIN1}"
    assert logged[0]["messages"][0]["content"].endswith(LATIN1)
