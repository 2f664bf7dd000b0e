"""Every route into a plan refuses the same checks, and a task with nothing to do is not verified.

The routes: the first plan, the model's revision between tasks, the human's re-plan
(`--resume --replan`) and a resumed run's saved plan. Each run is in process over the loopback
server, in a real git repository.
"""

from __future__ import annotations

import json

import pytest

from agent.test_loop import run_in_process
from agent_cli.agent.adapt.escalate import Answer
from agent_cli.core.errors import AgentError
from conftest import git
from reliability.relkit import (
    commit_count,
    finish,
    make_done,
    plan,
    repo_with,
    state_files,
    task,
)

ALWAYS = "always succeeds, so it proves nothing"
TWO = task("Create two.txt", "test -f two.txt")


def revise(*tasks: dict) -> dict:
    return {
        "tool": "revise_plan",
        "args": {"keep": False, "reason": "simpler", "tasks": list(tasks)},
    }


def revise_requests(srv) -> list[dict]:
    return [
        r
        for r in srv.chat_requests
        if [t["function"]["name"] for t in r.get("tools", [])] == ["revise_plan"]
    ]


@pytest.mark.parametrize(
    "vacuous",
    [
        "true",
        # its status is 0 whatever the test does: the subshell's, sed's
        "sh -c 'test -f done.txt || (true)'",
        "sh -c 'test -f done.txt | sed -n p'",
    ],
)
def test_the_first_plan_with_a_check_that_cannot_fail_is_asked_for_again(
    fake_server, tmp_path, vacuous
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task(cmd=vacuous)), plan(task()), make_done(), finish()])
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    assert ALWAYS in json.dumps(srv.chat_requests[1]["messages"])
    assert ran.of("plan")[0]["tasks"][0]["acceptance_cmd"] == "test -f done.txt"


def test_a_check_of_two_lines_is_refused_and_asked_for_again(fake_server, tmp_path):
    """The plan would show two commands, but without a shell the second line would reach the
    first as arguments and never run: the check the human approved would not be the one run."""
    repo = repo_with(tmp_path / "repo")
    two_lines = task(cmd="test -f done.txt\ntest -f never.txt")
    srv = fake_server([plan(two_lines), plan(task()), make_done(), finish()])
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    said = json.dumps(srv.chat_requests[1]["messages"])
    assert "task 1: `test -f done.txt\\\\ntest -f never.txt` holds a line break outside" in said
    assert ran.of("plan")[0]["tasks"][0]["acceptance_cmd"] == "test -f done.txt"


UNJUDGED = "neither an acceptance_cmd nor acceptance criteria, and no --accept command"
BARE = {"goal": "Create done.txt"}  # no command, no criteria: the verifier would fail it


def test_a_task_nothing_would_judge_is_refused_and_asked_for_again(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(BARE), plan(task()), make_done(), finish()])
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    assert f"task 1: it has {UNJUDGED}" in json.dumps(srv.chat_requests[1]["messages"])
    assert [e["tasks"][0]["acceptance_cmd"] for e in ran.of("plan")] == ["test -f done.txt"]


def test_a_task_without_command_or_criteria_is_judged_by_accept(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(BARE), make_done(), finish()])
    ran = run_in_process(repo, srv.url, "Create done.txt", accept=("test -f done.txt",))
    assert ran.code == 0, ran.text
    assert [(v["index"], v["command"], v["passed"]) for v in ran.of("verify")] == [
        (0, "test -f done.txt", True),
        (-1, "test -f done.txt", True),
    ]
    assert UNJUDGED not in json.dumps(srv.chat_requests)


def test_a_resumed_run_judges_its_bare_task_by_the_accept_it_was_started_with(
    fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    broken = fake_server([plan(BARE), {"status": 500, "body": "{}"}])
    started = run_in_process(repo, broken.url, "Create done.txt", accept=("test -f done.txt",))
    assert started.code == 1, started.text
    rest = fake_server([make_done(), finish()])
    ran = run_in_process(repo, rest.url)  # no --accept now: the saved one holds
    assert ran.code == 0, ran.text
    assert ran.of("verify")[0]["command"] == "test -f done.txt"


def test_the_humans_replan_to_a_task_nothing_would_judge_is_refused(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    first = fake_server([plan(task()), make_done("other.txt"), finish(), finish()])
    assert run_in_process(repo, first.url, "Create done.txt").code == 3
    cheat = revise(BARE)
    rest = fake_server([cheat, cheat])
    ran = run_in_process(repo, rest.url, answer=Answer("replan", "no check is needed"))
    assert ran.code == 3, ran.text
    asked = revise_requests(rest)
    assert len(asked) == 2 and f"task 1: it has {UNJUDGED}" in json.dumps(asked[1])
    assert not ran.of("plan_revised") and not ran.of("task_started")


def test_a_revision_that_replaces_a_check_by_true_is_refused_and_the_plan_kept(
    fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    cheat = revise(task("Create two.txt", "true"))
    srv = fake_server(
        [
            plan(task(), TWO),
            make_done(),
            finish(),
            cheat,
            cheat,
            make_done("two.txt"),
            finish(),
        ]
    )
    ran = run_in_process(repo, srv.url, "Create done.txt and two.txt")
    assert ran.code == 0, ran.text
    asked = revise_requests(srv)
    assert len(asked) == 2 and ALWAYS in json.dumps(asked[1]["messages"])
    assert "task 2: `true` always succeeds" in json.dumps(asked[1]["messages"])
    assert not ran.of("plan_revised")
    assert any("the plan is kept" in e["text"] for e in ran.of("notice"))
    verify = ran.of("verify")[-1]
    assert verify["command"] == "test -f two.txt" and verify["passed"]


def test_a_revision_cannot_turn_a_checked_task_into_one_the_model_judges(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    cheat = revise(task("Create two.txt", None))  # no command: the model would judge itself
    srv = fake_server(
        [plan(task(), TWO), make_done(), finish(), cheat, cheat, make_done("two.txt"), finish()]
    )
    ran = run_in_process(repo, srv.url, "Create done.txt and two.txt")
    assert ran.code == 0, ran.text
    asked = revise_requests(srv)
    assert len(asked) == 2
    assert "task 2 has no acceptance_cmd, but the tasks it replaces" in json.dumps(asked[1])
    assert not ran.of("plan_revised")
    verify = ran.of("verify")[-1]
    assert (verify["judge"], verify["command"], verify["passed"]) == (
        "command",
        "test -f two.txt",
        True,
    )


def test_the_humans_replan_passes_the_same_gate(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    first = fake_server([plan(task()), make_done("other.txt"), finish(), finish()])
    assert run_in_process(repo, first.url, "Create done.txt").code == 3  # rejected, no terminal
    cheat = revise(task("Create done.txt", "echo ok"))
    rest = fake_server([cheat, cheat])
    ran = run_in_process(repo, rest.url, answer=Answer("replan", "any check will do"))
    assert ran.code == 3, ran.text
    asked = revise_requests(rest)
    assert len(asked) == 2 and "task 1: `echo ok` always succeeds" in json.dumps(asked[1])
    assert not ran.of("plan_revised") and not ran.of("task_started")
    said = [e["text"] for e in ran.of("notice")]
    assert any("the re-plan reply was not usable" in text for text in said), said
    assert not any("the model kept the plan" in text for text in said), said  # it did not
    assert commit_count(repo) == 1


def test_the_humans_replan_the_model_declines_is_said_so(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    first = fake_server([plan(task()), make_done("other.txt"), finish(), finish()])
    assert run_in_process(repo, first.url, "Create done.txt").code == 3
    rest = fake_server([{"tool": "revise_plan", "args": {"keep": True}}])
    ran = run_in_process(repo, rest.url, answer=Answer("replan", "split it"))
    assert ran.code == 3, ran.text
    said = [e["text"] for e in ran.of("notice")]
    assert "the model kept the plan; task 1 is still rejected" in said, said
    assert not any("not usable" in text for text in said), said


def test_a_resumed_plan_whose_saved_check_cannot_fail_is_refused(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    broken = fake_server([plan(task(), TWO), make_done(), finish(), {"status": 500, "body": "{}"}])
    assert run_in_process(repo, broken.url, "Create done.txt and two.txt").code == 1
    path = state_files(repo)[-1]
    record = json.loads(path.read_text())
    record["agent_state"]["plan"][1]["acceptance_cmd"] = "sh -c 'exit 0'"
    path.write_text(json.dumps(record))
    rest = fake_server([make_done("two.txt"), finish()])
    with pytest.raises(AgentError, match=r"cannot be resumed.*task 2: `sh -c 'exit 0'` always"):
        run_in_process(repo, rest.url)
    assert rest.chat_requests == [] and commit_count(repo) == 2


def test_a_task_that_changed_nothing_and_whose_check_passed_before_has_nothing_to_do(
    fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task(cmd="test -f README.md")), finish("it was there already")])
    ran = run_in_process(repo, srv.url, "Make sure README.md exists")
    assert ran.code == 0, ran.text
    assert [e["status"] for e in ran.of("task_done")] == ["nothing_to_do"]
    done = ran.of("run_done")[0]
    assert done["status"] == "nothing_to_do" and done["tasks"][0]["status"] == "nothing_to_do"
    assert done["message"].startswith("nothing to do") and "verified" not in done["tasks"][0]
    assert commit_count(repo) == 1 and len(ran.of("task_started")) == 1


def test_a_run_with_a_task_with_nothing_to_do_does_not_claim_it(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [plan(task(), task("Keep README.md", "test -f README.md")), make_done(), finish()]
        + [{"tool": "revise_plan", "args": {"keep": True}}, finish()]
    )
    ran = run_in_process(repo, srv.url, "Create done.txt")
    assert ran.code == 0, ran.text
    done = ran.of("run_done")[0]
    assert [t["status"] for t in done["tasks"]] == ["verified", "nothing_to_do"]
    assert done["message"].startswith("1 of 2 tasks verified; nothing to do for task(s) 2")
    assert "every task verified" not in done["message"]


def test_a_run_whose_every_task_is_regression_only_says_so_last(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task(cmd="test -f README.md")), make_done("notes.txt"), finish()])
    ran = run_in_process(repo, srv.url, "Write notes.txt", mode="plain")
    assert ran.code == 0, ran.text
    last = [line for line in ran.text.splitlines() if "(exit code 0)" in line][-1]
    assert last.endswith(
        "every task verified, each regression-only: every check already passed "
        "before its task started"
    ), ran.text
    assert "notes.txt" in git(repo, "show", "--stat", "--format=", "HEAD")
