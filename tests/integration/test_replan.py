"""Re-planning between tasks through the forced `revise_plan` tool, and the closing summary."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from runkit import GOAL, add_median, events_of, facts, finish, plan, state_of, task

from conftest import git

pytestmark = pytest.mark.slow
ADAPT = {"AGENT_REPLAN": "after_task", "AGENT_FINAL_SUMMARY": "true"}
KEEP = {"tool": "revise_plan", "args": {"keep": True}}


def file_task(name: str) -> dict:
    return task(f"Write {name}", f"test -f {name}")


def write(name: str) -> list[dict]:
    return [
        {"tool": "write_file", "args": {"path": name, "content": f"{name}\n"}},
        finish(f"wrote {name}"),
    ]


def revise(*tasks: dict, reason: str = "the notes are covered") -> dict:
    return {"tool": "revise_plan", "args": {"keep": False, "reason": reason, "tasks": list(tasks)}}


def run(agent, srv, repo, *extra, env=None):
    return agent(
        "run",
        GOAL,
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        *extra,
        cwd=repo,
        env={**ADAPT, **(env or {})},
    )


def revise_requests(srv) -> list[dict]:
    return [
        r
        for r in srv.chat_requests
        if [t["function"]["name"] for t in r.get("tools", [])] == ["revise_plan"]
    ]


def started(proc) -> list[str]:
    return [e["goal"] for e in events_of(proc.stdout) if e["event"] == "task_started"]


def test_a_revision_drops_a_task_and_each_new_task_is_one_commit(
    agent_in_process, fake_server, demo_repo
):
    srv = fake_server(
        [
            plan(task(), file_task("NOTES.txt"), file_task("DROPPED.txt")),
            add_median(),
            finish(),
            revise(file_task("A.txt"), file_task("B.txt")),
            *write("A.txt"),
            KEEP,
            *write("B.txt"),
            facts(),
            {"content": "Added median, A.txt and B.txt."},
        ]
    )
    proc = run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert started(proc) == ["Add median() to calc/stats.py", "Write A.txt", "Write B.txt"]
    log = git(demo_repo, "log", "--format=%s").splitlines()
    assert log == ["Write B.txt", "Write A.txt", "Add median() to calc/stats.py", "initial"]
    for sha, name in zip(
        git(demo_repo, "log", "--format=%H", "-2").split(), ("B.txt", "A.txt"), strict=False
    ):
        assert git(demo_repo, "show", "--name-only", "--format=", sha).split() == [name]
    ask = revise_requests(srv)
    assert len(ask) == 2 and all(r["tool_choice"] != "auto" for r in ask)
    text = ask[0]["messages"][-1]["content"]
    for part in (
        "DONE (never changed)",
        "[verified, commit ",
        "its summary: added median()",
        "REMAINING",
        "Write DROPPED.txt",
        "Success criteria of the whole plan: the tests pass",
        "BUDGET: 198 of 200 tool calls left (about 2 per verified task",
    ):
        assert part in text, part
    assert text.rstrip().endswith(GOAL) and "At this pace" not in text
    revised = [e for e in events_of(proc.stdout) if e["event"] == "plan_revised"]
    assert [t["goal"] for t in revised[0]["old"]] == ["Write NOTES.txt", "Write DROPPED.txt"]
    assert revised[0]["reason"] == "the notes are covered" and revised[0]["start"] == 1
    state = state_of(demo_repo)["agent_state"]
    assert len(state["revisions"]) == 1 and state["replans"] == 2
    assert state["closing_summary"] == "Added median, A.txt and B.txt."
    assert "tools" not in srv.chat_requests[-1]  # the summary request offers no tool
    assert events_of(proc.stdout)[-2]["event"] == "final_summary"


def test_short_budget_is_said_so_the_model_can_merge(agent_in_process, fake_server, demo_repo):
    srv = fake_server(
        [
            plan(task(), file_task("A.txt"), file_task("B.txt")),
            add_median(),
            finish(),
            revise(file_task("AB.txt"), reason="merged to fit the budget"),
            *write("AB.txt"),
            facts(),
            {"content": ""},
        ]
    )
    proc = run(agent_in_process, srv, demo_repo, "--max-steps", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = revise_requests(srv)[0]["messages"][-1]["content"]
    assert "At this pace the 2 remaining task(s) need more than is left" in text
    assert started(proc)[1:] == ["Write AB.txt"]
    notices = [e["text"] for e in events_of(proc.stdout) if e["event"] == "notice"]
    assert "the model gave no closing summary" in notices  # an empty reply is no error


def test_invalid_revision_keeps_the_plan_and_max_replans_bounds_the_checks(
    agent_in_process, fake_server, demo_repo
):
    broken = {"tool_calls": [{"name": "revise_plan", "arguments": '{"keep": false'}]}
    srv = fake_server(
        [
            plan(file_task("A.txt"), file_task("B.txt"), file_task("C.txt")),
            *write("A.txt"),
            broken,
            broken,  # the re-ask with the reason
            *write("B.txt"),
            *write("C.txt"),
        ]
    )
    proc = run(
        agent_in_process,
        srv,
        demo_repo,
        env={"AGENT_MAX_REPLANS": "1", "AGENT_FINAL_SUMMARY": "false"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, again = revise_requests(srv)  # one check: its request and one re-ask
    assert (
        "Your previous revision was rejected: revise_plan arguments are unusable"
        in (again["messages"][-2]["content"])
    )
    notices = [e["text"] for e in events_of(proc.stdout) if e["event"] == "notice"]
    assert sum("the plan is kept" in n for n in notices) == 1
    assert started(proc) == ["Write A.txt", "Write B.txt", "Write C.txt"]
    assert all("tools" in r for r in srv.chat_requests)  # final_summary = false: no summary


def test_replan_off_sends_no_revise_request(agent_in_process, fake_server, demo_repo):
    srv = fake_server(
        [
            plan(file_task("A.txt"), file_task("B.txt")),
            *write("A.txt"),
            *write("B.txt"),
            facts(),
            {"content": "done"},
        ]
    )
    proc = run(agent_in_process, srv, demo_repo, env={"AGENT_REPLAN": "off"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert revise_requests(srv) == [] and len(srv.chat_requests) == 7


def test_resume_after_sigkill_right_after_a_revision_runs_the_revised_plan(
    agent_env, agent_in_process, fake_server, demo_repo, tmp_path
):
    srv = fake_server(
        [
            plan(task(), file_task("DROPPED.txt")),
            add_median(),
            finish(),
            revise(file_task("A.txt")),
            {"delay": 60, **write("A.txt")[0]},
        ]
    )
    out = tmp_path / "out.jsonl"
    with open(out, "w") as sink:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent_cli",
                "run",
                GOAL,
                "--yes",
                "--json",
                "--base-url",
                srv.url,
            ],
            cwd=demo_repo,
            env={**agent_env, **ADAPT},
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
    try:
        end = time.monotonic() + 60
        while "plan_revised" not in out.read_text() and time.monotonic() < end:
            time.sleep(0.02)
        assert "plan_revised" in out.read_text()
    finally:
        agent.kill()  # SIGKILL: no handler runs, nothing more is saved
        agent.wait()
    saved = state_of(demo_repo)["agent_state"]["plan"]
    assert [t["goal"] for t in saved] == ["Add median() to calc/stats.py", "Write A.txt"]
    srv2 = fake_server(write("A.txt") + [facts(), {"content": "resumed and done"}])
    proc = agent_in_process(  # the killed process is what mattered; the resume is any run
        "run", "--resume", "--yes", "--json", "--base-url", srv2.url, cwd=demo_repo, env=ADAPT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert started(proc) == ["Write A.txt"]
    assert "DROPPED" not in json.dumps(srv2.chat_requests[0]["messages"][-1])
    assert git(demo_repo, "log", "--format=%s").splitlines()[:2] == [
        "Write A.txt",
        "Add median() to calc/stats.py",
    ]


def test_every_forced_request_is_in_the_trajectory(agent_in_process, fake_server, demo_repo):
    judged = {"goal": "Describe A.txt", "acceptance": "the summary names A.txt"}
    verdict = {"tool": "submit_verdict", "args": {"verdict": "pass", "reason": "it does"}}
    srv = fake_server(
        [
            plan(file_task("A.txt"), {**judged, "acceptance_cmd": None}),
            *write("A.txt"),
            KEEP,
            finish("A.txt holds its name"),
            verdict,
            facts(),
            {"content": "done"},
        ]
    )
    proc = run(agent_in_process, srv, demo_repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    trajectory = next((demo_repo / ".agent" / "runs").glob("*/trajectory.jsonl")).read_text()
    logged = [
        r["messages"] for r in map(json.loads, trajectory.splitlines()) if r["type"] == "request"
    ]
    forced = {
        names[0]: r["messages"]
        for r in srv.chat_requests
        if len(names := [t["function"]["name"] for t in r.get("tools", [])]) == 1
    }
    assert sorted(forced) == ["revise_plan", "submit_facts", "submit_plan", "submit_verdict"]
    for name, messages in forced.items():
        assert messages in logged, name


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ({"content": "Added median and", "finish_reason": "length"}, "cut at the reply's length"),
        ({"content": "Added median. " * 400}, "its first 3,000 characters are kept"),
    ],
)
def test_a_closing_summary_cut_short_is_said_to_be(
    agent_in_process, fake_server, demo_repo, reply, says
):
    srv = fake_server([plan(task()), add_median(), finish(), facts(), reply])
    proc = run(agent_in_process, srv, demo_repo, env={"AGENT_REPLAN": "off"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kinds = [(e["event"], e.get("text", "")) for e in events_of(proc.stdout)]
    at = [k for k, _ in kinds].index("final_summary")
    assert kinds[at + 1][0] == "notice" and says in kinds[at + 1][1], kinds[at:]
