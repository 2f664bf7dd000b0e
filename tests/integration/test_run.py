"""End to end: `agent run` through the CLI's entry point, a real git repo, real pytest, the
loopback server."""

from __future__ import annotations

import json

import pytest
from runkit import (
    BAD_MEDIAN,
    GOAL,
    GOOD_MEDIAN,
    PYTEST,
    add_median,
    events_of,
    facts,
    finish,
    plan,
    read_stats,
    replace_median,
    run_tests,
    state_of,
    task,
)

from conftest import git
from reliability.relkit import tool_results

# Every run here runs its acceptance command, `python -m pytest`.
pytestmark = pytest.mark.slow


def agent_run(agent_in_process, srv, repo, *extra, goal=GOAL):
    return agent_in_process("run", goal, "--yes", "--json", "--base-url", srv.url, *extra, cwd=repo)


def test_success_commits_the_verified_task(agent_in_process, fake_server, demo_repo):
    srv = fake_server([plan(task()), read_stats(), add_median(), run_tests(), finish()])
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = state_of(demo_repo)
    branch = git(demo_repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    assert branch == f"agent/{state['run_id']}" and state["status"] == "verified"
    log = git(demo_repo, "log", "--format=%s%n%b", "-1")
    assert "Add median() to calc/stats.py" in log and f"Agent-Run: {state['run_id']}" in log
    assert git(demo_repo, "status", "--porcelain") == ""  # .agent/ is excluded, tree clean
    assert ".agent/" in (demo_repo / ".git" / "info" / "exclude").read_text()
    assert int(git(demo_repo, "rev-list", "--count", "HEAD")) == 2
    kinds = [e["event"] for e in events_of(proc.stdout)]
    for name in (
        "plan",
        "task_started",
        "tool_call",
        "tool_result",
        "verify",
        "task_done",
        "run_done",
    ):
        assert name in kinds
    done = events_of(proc.stdout)[-1]
    assert done["event"] == "run_done" and done["tasks"][0]["exit_code"] == 0
    # a server on this machine bills nothing unless prices are set (Settings.prices)
    assert done["prompt_tokens"] > 0 and done["cost_usd"] == 0.0


def test_goal_is_last_in_every_request(agent_in_process, fake_server, demo_repo):
    srv = fake_server([plan(task()), read_stats(), add_median(), finish(), facts()])
    assert agent_run(agent_in_process, srv, demo_repo).returncode == 0
    assert len(srv.chat_requests) == 5  # plan, three steps, the facts at the end
    for req in srv.chat_requests:
        assert req["messages"][-1]["role"] == "user"
        assert req["messages"][-1]["content"].rstrip().endswith(GOAL)


def test_failed_first_attempt_then_pass_carries_the_failure(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server(
        [
            plan(task()),
            add_median(BAD_MEDIAN),
            finish("first try"),
            replace_median(BAD_MEDIAN, GOOD_MEDIAN),
            finish("fixed"),
        ]
    )
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    retry = srv.chat_requests[3]
    text = json.dumps(retry["messages"])
    assert "attempt 2 of 2" in text and "exited 1" in text and "test_median_even" in text
    assert state_of(demo_repo)["agent_state"]["plan"][0]["attempts"] == 2
    assert int(git(demo_repo, "rev-list", "--count", "HEAD")) == 2


def test_escalation_leaves_changes_uncommitted(agent_in_process, fake_server, demo_repo):
    srv = fake_server(
        [
            plan(task(), task("Document median in README.md", None)),
            add_median(BAD_MEDIAN),
            finish("try one"),
            finish("try two"),
        ]
    )
    proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "I tried twice and couldn't finish this myself" in proc.stdout
    assert "agent run --resume" in proc.stdout
    assert "calc/stats.py" in git(demo_repo, "status", "--porcelain")
    assert int(git(demo_repo, "rev-list", "--count", "HEAD")) == 1
    tasks = state_of(demo_repo)["agent_state"]["plan"]
    assert [t["status"] for t in tasks] == ["rejected", "pending"]


def test_step_budget_exits_4(agent_in_process, fake_server, demo_repo):
    srv = fake_server([plan(task())] + [read_stats()] * 10)
    proc = agent_run(agent_in_process, srv, demo_repo, "--max-steps", "3")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    ev = [e for e in events_of(proc.stdout) if e["event"] == "budget_exhausted"]
    assert ev and (ev[0]["budget"], ev[0]["used"], ev[0]["limit"]) == ("max_steps", 3, 3)
    assert state_of(demo_repo)["status"] == "budget_exhausted"


def test_the_budget_line_of_a_real_run_says_which_budget_how_much_and_how_to_go_on(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task())] + [read_stats()] * 10)
    proc = agent_in_process(
        "run", GOAL, "--yes", "--base-url", srv.url, "--max-steps", "3", cwd=demo_repo
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("budget ran out")]
    assert lines == [
        "budget ran out: 3 of 3 tool calls used (raise --max-steps, then `agent run --resume`)"
    ]


def test_money_budget_exits_4(agent_in_process, fake_server, demo_repo):
    usage = {"prompt_tokens": 100_000, "completion_tokens": 0}
    srv = fake_server([plan(task())] + [{**read_stats(), "usage": usage}] * 10)
    # A loopback server bills nothing unless prices are set (Settings.prices): set one.
    proc = agent_in_process(
        "run",
        GOAL,
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        "--budget-usd",
        "0.03",
        cwd=demo_repo,
        env={"AGENT_PRICE_INPUT_PER_MTOK": "0.15"},
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    ev = [e for e in events_of(proc.stdout) if e["event"] == "budget_exhausted"]
    assert ev and ev[0]["budget"] == "budget_usd" and ev[0]["limit"] == 0.03
    assert ev[0]["used"] >= 0.03


def test_the_reply_that_crosses_the_money_budget_still_runs_and_no_request_follows(
    agent_in_process, fake_server, demo_repo
):
    """The budget is checked before every model call: a reply bought within it (here the
    finish, whose usage crosses it) is run, verified and committed; no request follows it."""
    usage = {"prompt_tokens": 100_000, "completion_tokens": 0}  # $0.015 at $0.15 per Mtok
    srv = fake_server(
        [
            plan(task()),
            {**add_median(), "usage": usage},
            {**finish(), "usage": {**usage, "prompt_tokens": 200_000}},
        ]
    )
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, "--budget-usd", "0.04",
        cwd=demo_repo, env={"AGENT_PRICE_INPUT_PER_MTOK": "0.15"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    done = events_of(proc.stdout)[-1]
    assert done["status"] == "verified" and done["cost_usd"] >= 0.04
    assert len(srv.chat_requests) == 3  # no facts, no closing summary past the budget
    assert f"Agent-Run: {state_of(demo_repo)['run_id']}" in git(demo_repo, "log", "-1")


def test_malformed_plan_is_asked_again_then_stops(agent_in_process, fake_server, demo_repo):
    bad = {"tool": "submit_plan", "args": {"goal": GOAL, "tasks": [], "success_criteria": ""}}
    srv = fake_server([bad, {"tool": "submit_plan", "arguments": "{not json"}])
    srv.script[1] = {"tool_calls": [{"name": "submit_plan", "arguments": "{not json"}]}
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 1 and "valid plan" in proc.stderr
    assert "rejected" in json.dumps(srv.chat_requests[1]["messages"])
    assert git(demo_repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


def test_malformed_plan_then_a_good_one(agent_in_process, fake_server, demo_repo):
    no_goal = plan({"goal": " ", "acceptance": "", "acceptance_cmd": None})
    srv = fake_server([no_goal, plan(task()), add_median(), finish()])
    assert agent_run(agent_in_process, srv, demo_repo).returncode == 0


def test_tool_errors_go_back_to_the_model(agent_in_process, fake_server, demo_repo):
    srv = fake_server(
        [
            plan(task()),
            {"tool": "no_such_tool", "args": {}},
            {"tool_calls": [{"name": "read_file", "arguments": "{oops"}]},
            {"tool": "read_file", "args": {"path": "../../etc/passwd"}},
            {"tool": "edit_file", "args": {"path": "calc/stats.py", "old": "zzz", "new": "y"}},
            add_median(),
            finish(),
        ]
    )
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tool_msgs = [tool_results(r)[-1] for r in srv.chat_requests[2:6]]
    assert "unknown tool" in tool_msgs[0]
    assert "not valid JSON" in tool_msgs[1]
    assert "outside" in tool_msgs[2]
    assert "0" in tool_msgs[3] and "match" in tool_msgs[3]


def test_plan_only_changes_nothing(agent_in_process, fake_server, demo_repo):
    exclude = demo_repo / ".git" / "info" / "exclude"
    before = exclude.read_bytes() if exclude.exists() else None
    srv = fake_server([plan(task())])
    proc = agent_in_process("run", GOAL, "--plan-only", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 0 and "Add median()" in proc.stdout
    assert git(demo_repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert not (demo_repo / ".agent").exists()
    assert (exclude.read_bytes() if exclude.exists() else None) == before


def test_without_terminal_or_yes_refuses_before_any_model_call(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task())])
    proc = agent_in_process("run", GOAL, "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 2 and "--yes" in proc.stderr
    assert srv.chat_requests == []


def test_dirty_tree_is_refused_and_allow_dirty_keeps_user_work(
    agent_in_process, fake_server, demo_repo
):
    (demo_repo / "README.md").write_text("my unsaved notes\n")
    srv = fake_server(
        [
            plan(task()),
            add_median(),
            {"tool": "write_file", "args": {"path": "README.md", "content": "x"}},
            finish(),
        ]
    )
    proc = agent_run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 1 and "uncommitted" in proc.stderr and srv.chat_requests == []
    proc = agent_run(agent_in_process, srv, demo_repo, "--allow-dirty")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (demo_repo / "README.md").read_text() == "my unsaved notes\n"
    assert "uncommitted work" in json.dumps(srv.chat_requests[3]["messages"])
    assert git(demo_repo, "status", "--porcelain").strip() == "M README.md"
    assert "README.md" not in git(demo_repo, "show", "--stat", "--format=", "HEAD")


def test_allow_dirty_keeps_user_work_through_the_commands_the_model_runs_too(
    agent_in_process, fake_server, demo_repo
):
    (demo_repo / "README.md").write_text("my unsaved notes\n")
    (demo_repo / "drafts").mkdir()
    (demo_repo / "drafts" / "idea.txt").write_text("an untracked idea\n")
    clobber = "cp calc/__init__.py README.md && rm drafts/idea.txt"
    srv = fake_server(
        [plan(task()), add_median(), {"tool": "run", "args": {"cmd": clobber}}, finish()]
    )
    proc = agent_run(agent_in_process, srv, demo_repo, "--allow-dirty")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (demo_repo / "README.md").read_text() == "my unsaved notes\n"
    assert (demo_repo / "drafts" / "idea.txt").read_text() == "an untracked idea\n"
    said = json.dumps(
        srv.chat_requests[3]["messages"]
    )  # the command's result, as the model read it
    assert "README.md" in said and "put back as it was" in said
    assert "README.md" not in git(demo_repo, "show", "--stat", "--format=", "HEAD")


def test_accept_flag_is_used_and_is_the_final_gate(agent_in_process, fake_server, demo_repo):
    srv = fake_server([plan(task(cmd=None)), add_median(), finish()])
    proc = agent_run(agent_in_process, srv, demo_repo, "--accept", PYTEST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verifies = [e for e in events_of(proc.stdout) if e["event"] == "verify"]
    assert [v["index"] for v in verifies] == [0, -1] and all(v["passed"] for v in verifies)


def test_an_accept_command_that_could_never_pass_is_refused_before_any_request(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task(cmd=None)), add_median(), finish()])
    for cmd, says in (
        ('pytest "unclosed', "cannot be parsed"),
        ("no-such-program-here -q", "is not on PATH nor in the repository"),
        ("true", "always succeeds"),
        (f"{PYTEST}\npython -m pytest -q tests/", "holds a line break outside quotes"),
    ):
        proc = agent_run(agent_in_process, srv, demo_repo, "--accept", cmd)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        done = events_of(proc.stdout)[-1]
        assert done["event"] == "run_done" and says in done["message"]
        assert done["message"].startswith("--accept: ") and "nothing was started" in done["message"]
    assert srv.chat_requests == []  # refused before the plan was asked for
    assert git(demo_repo, "branch", "--list", "agent/*").strip() == ""


def test_a_failed_final_check_says_what_it_is_and_the_one_way_on(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server([plan(task()), add_median(), finish()])
    proc = agent_in_process(
        "run", GOAL, "--yes", "--base-url", srv.url, "--accept", "python -m pytest -q nowhere",
        cwd=demo_repo,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    block = " ".join(proc.stdout[proc.stdout.index("Needs you") :].split())  # as wrapped
    assert "Every task passed its own check, but the final check did not" in block
    assert "`agent run --resume` runs the final check again" in block
    assert "I tried" not in block and "--skip" not in block and "its words" not in block


def test_next_run_recalls_the_last_episode_and_fact(agent_in_process, fake_server, demo_repo):
    srv = fake_server([plan(task()), add_median(), finish()])
    assert agent_run(agent_in_process, srv, demo_repo).returncode == 0
    found = json.loads(
        agent_in_process(
            "recall", "tests/test_stats.py passes", "--kind", "procedure", "--json", cwd=demo_repo
        ).stdout
    )
    assert any(PYTEST in f["text"] and f["source"].startswith("harness") for f in found)
    goal2 = "Add a mode function to calc/stats.py so that its tests pass"
    srv2 = fake_server([plan(task("Add mode() to calc/stats.py"), goal=goal2), finish()])
    agent_run(agent_in_process, srv2, demo_repo, goal=goal2)
    planning = json.dumps(srv2.chat_requests[0]["messages"])
    assert "<retrieved_memory>" in planning and "median" in planning
    executing = json.dumps(srv2.chat_requests[1]["messages"])
    assert "<retrieved_memory>" in executing


def test_runs_lists_status_and_resume_needs_an_unfinished_run(
    agent_in_process, fake_server, demo_repo
):
    assert "no runs yet" in agent_in_process("runs", cwd=demo_repo).stdout
    srv = fake_server([plan(task()), add_median(), finish()])
    assert agent_run(agent_in_process, srv, demo_repo).returncode == 0
    rows = json.loads(agent_in_process("runs", "--json", cwd=demo_repo).stdout)
    assert len(rows) == 1 and rows[0]["status"] == "verified" and rows[0]["goal"] == GOAL
    proc = agent_in_process("run", "--resume", "--yes", "--base-url", srv.url, cwd=demo_repo)
    assert proc.returncode == 1 and "no unfinished run" in proc.stderr


def test_resume_after_escalation_retries_the_rejected_task_only(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server(
        [
            plan(task(), task("Check the mean still works", PYTEST)),
            add_median(BAD_MEDIAN),
            finish("one"),
            finish("two"),
        ]
    )
    assert agent_run(agent_in_process, srv, demo_repo).returncode == 3
    srv2 = fake_server([replace_median(BAD_MEDIAN, GOOD_MEDIAN), finish("fixed"), finish("ok")])
    proc = agent_in_process(
        "run", "--resume", "--yes", "--json", "--base-url", srv2.url, cwd=demo_repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(r["tools"][0]["function"]["name"] != "submit_plan" for r in srv2.chat_requests)
    assert "attempt 1 of 2" in srv2.chat_requests[0]["messages"][-1]["content"]
    assert int(git(demo_repo, "rev-list", "--count", "HEAD")) == 2  # task 2 changed nothing
    assert state_of(demo_repo)["status"] == "verified"


def test_the_planner_is_told_when_the_file_list_is_cut(agent_in_process, fake_server, demo_repo):
    many = demo_repo / "aaa_generated"
    many.mkdir()
    for n in range(305):
        (many / f"f{n:03d}.txt").write_text(f"{n}\n")
    git(demo_repo, "add", "-A")
    git(demo_repo, "commit", "-qm", "many files")
    srv = fake_server([plan(task())])
    proc = agent_run(agent_in_process, srv, demo_repo, "--plan-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listing = json.dumps(srv.chat_requests[0]["messages"])
    total = len(git(demo_repo, "ls-files").splitlines())
    assert f"[... {total - 300:,} more files not listed here, of {total:,};" in listing
    assert "aaa_generated/f000.txt" in listing and "calc/__init__.py" not in listing
