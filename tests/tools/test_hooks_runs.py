"""Hooks in scripted `agent run`s (the loopback model server, real git, real hook processes):
a task_verified hook that refuses, hooks that hang, run_end's outcome, a repository's trust."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from agent_cli.cli.config import trust
from agent_cli.cli.config.settings import load_settings
from reliability.relkit import (
    GOAL,
    PY,
    call,
    commit_count,
    events,
    finish,
    make_done,
    no_facts,
    pid_gone,
    plan,
    read_state,
    repo_with,
    spawn_agent,
    task,
    tool_results,
    wait_for,
)

__all__ = ["spawn_agent"]  # a fixture


def py_hook(code: str, **spec: object) -> str:
    """One hook table's keys: `python -c CODE` and `spec`, as TOML."""
    lines = [f"command = {json.dumps([PY, '-c', code])}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in spec.items()]
    return "\n".join(lines) + "\n"


def agentrc(path: Path, **events_: list[str]) -> Path:
    """A .agentrc holding each event's hook tables."""
    path.write_text(
        "".join(
            f"[[hooks.{event}]]\n{table}" for event, tables in events_.items() for table in tables
        )
    )
    return path


def run(run_agent, srv, repo: Path, rc: Path, *flags: str):
    return run_agent(
        "run", GOAL, "--yes", *flags, "--base-url", srv.url, cwd=repo, env={"AGENT_RC": str(rc)}
    )


def test_a_task_verified_hook_that_exits_2_fails_the_attempt_and_the_retry_follows(
    agent_in_process, fake_server, tmp_path
):
    seen, ended = tmp_path / "verified.json", tmp_path / "run_end.json"
    refuse_once = (
        "import json, pathlib, sys\n"
        f"seen = pathlib.Path({str(seen)!r})\n"
        "data = sys.stdin.read()\n"
        "if not seen.exists():\n"
        "    seen.write_text(data)\n"
        "    print('CHANGELOG.md has no entry for this change', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    keep = f"import pathlib, sys; pathlib.Path({str(ended)!r}).write_text(sys.stdin.read())"
    rc = agentrc(
        tmp_path / "user-agentrc", task_verified=[py_hook(refuse_once)], run_end=[py_hook(keep)]
    )
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), make_done(), finish(), finish("again"), no_facts()])
    proc = run(agent_in_process, srv, repo, rc, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stream = events(proc.stdout)
    verdicts = [(e["passed"], e["judge"]) for e in stream if e["event"] == "verify"]
    assert verdicts == [(False, "hook"), (True, "command")]
    refused = next(e for e in stream if e["event"] == "verify")
    assert "CHANGELOG.md has no entry for this change" in refused["reason"]
    assert refused["exit_code"] == 0  # the command's own: it passed; the hook refused after
    # the retry is a new attempt that carries the hook's reason
    assert "CHANGELOG.md has no entry" in json.dumps(srv.chat_requests[3]["messages"])
    plan_state = read_state(repo)["agent_state"]["plan"]
    assert plan_state[0]["status"] == "verified" and plan_state[0]["attempts"] == 2
    assert commit_count(repo) == 2  # the task's one commit, after the hook agreed
    payload = json.loads(seen.read_text())
    assert payload["event"] == "task_verified" and payload["task"]["index"] == 0
    assert payload["result"]["passed"] is True and payload["tool"] is None
    # run_end: once, with the outcome run_done reports, before run_done ends the stream
    done = stream[-1]
    assert done["event"] == "run_done" and stream[-2]["hook"] == "run_end"
    outcome = json.loads(ended.read_text())
    assert outcome["event"] == "run_end" and outcome["run_id"] == done["run_id"]
    assert outcome["outcome"]["status"] == "verified" and outcome["outcome"]["exit_code"] == 0
    assert outcome["task"] is None


def test_hooks_that_hang_are_stopped_at_their_timeout_pre_tool_blocks_post_tool_goes_on(
    agent_in_process, fake_server, tmp_path
):
    hang = "import time; time.sleep(60)"
    no_mcp = "import sys; print('no MCP tools in this repository', file=sys.stderr); sys.exit(2)"
    rc = agentrc(
        tmp_path / "user-agentrc",
        pre_tool=[
            py_hook(hang, matcher="run", timeout_s=1),
            py_hook(no_mcp, matcher="mcp__.*"),
        ],
        post_tool=[py_hook(hang, matcher="write_file", timeout_s=1)],
    )
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        [
            plan(task()),
            call("run", cmd="echo ran > ran.txt"),
            call("mcp__time__get_current_time", timezone="UTC"),
            make_done(),
            finish(),
            no_facts(),
        ]
    )
    start = time.monotonic()
    proc = run(agent_in_process, srv, repo, rc)  # the terminal log, not --json
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - start < 60
    assert not (repo / "ran.txt").exists() and (repo / "done.txt").exists()
    result = tool_results(srv.chat_requests[2])[0]
    assert "the tool did not run" in result and "within its timeout of 1s" in result
    assert "a pre_tool hook that does not answer blocks the tool" in result
    assert "timed out, blocking run" in proc.stdout
    # a tool by its MCP name is matched like any other, at the one place calls are dispatched
    mcp = tool_results(srv.chat_requests[3])[0]
    assert "no MCP tools in this repository" in mcp and "unknown tool" not in mcp
    assert "blocked mcp__time__get_current_time: no MCP tools" in proc.stdout
    assert "hook post_tool" in proc.stdout and "timeout of 1s" in proc.stdout


def test_each_tools_events_come_in_order_pre_tool_call_result_post_tool(
    agent_in_process, fake_server, tmp_path
):
    misspelt = py_hook("print('guarded')", matcher="write_flie|mcp__git__.*")
    rc = agentrc(
        tmp_path / "user-agentrc",
        pre_tool=[py_hook("pass", matcher="run"), misspelt],
        post_tool=[py_hook("print('looked at it')", matcher="run")],
    )
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), call("run", cmd="echo hi"), make_done(), finish(), no_facts()])
    proc = run(agent_in_process, srv, repo, rc, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stream = events(proc.stdout)
    start = next(i for i, e in enumerate(stream) if e["event"] == "tool_call")
    kinds = [e.get("hook") or e["event"] for e in stream[start : start + 4]]
    assert kinds == ["tool_call", "pre_tool", "tool_result", "post_tool"]
    # a guard whose matcher matches none of the run's tools never runs: said once, the
    # hooks that match something are not named
    said = [e["text"] for e in stream if e["event"] == "notice" and "matches none" in e["text"]]
    assert len(said) == 1 and "'write_flie|mcp__git__.*'" in said[0] and "never runs" in said[0]


def test_an_untrusted_repositorys_hooks_are_ignored_with_a_notice(
    agent_in_process, fake_server, tmp_path
):
    refuse = py_hook("import sys; print('REPO HOOK RAN', file=sys.stderr); sys.exit(2)")
    repo = tmp_path / "repo"
    repo.mkdir()
    agentrc(repo / ".agentrc", pre_tool=[refuse])
    repo_with(repo)
    srv = fake_server([plan(task()), make_done(), finish(), no_facts()])
    proc = run(agent_in_process, srv, repo, tmp_path / "no-user-agentrc", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hooks ignored (it is not trusted; run `agent trust`" in proc.stderr
    assert not [e for e in events(proc.stdout) if e["event"] == "hook"]
    assert "REPO HOOK RAN" not in json.dumps(srv.chat_requests)


def test_a_trusted_repositorys_hooks_run_after_the_users_until_its_agentrc_changes(tmp_path):
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trusted.json"), "HOME": str(tmp_path)}
    user = agentrc(tmp_path / "user-agentrc", pre_tool=[py_hook("pass")])
    repo = tmp_path / "repo"
    repo.mkdir()
    agentrc(repo / ".agentrc", pre_tool=[py_hook("print('repo')", matcher="run")])

    def pre_tool() -> tuple[list[str], list[str]]:
        settings = load_settings(repo, env=env, user_rc=user)
        return [h.command[-1] for h in settings.hooks.pre_tool], settings.notices

    hooks, notices = pre_tool()
    assert hooks == ["pass"] and "hooks ignored (it is not trusted" in notices[0]
    trust.record(repo, env)
    assert pre_tool() == (["pass", "print('repo')"], [])
    (repo / ".agentrc").write_text((repo / ".agentrc").read_text() + "timeout_s = 5\n")
    hooks, notices = pre_tool()
    assert hooks == ["pass"] and "it changed since you trusted it" in notices[0]


def test_with_the_sandbox_a_hook_runs_inside_it(agent_in_process, fake_server, tmp_path):
    from agent_cli.core.errors import WorkspaceError
    from agent_cli.workspace.shell.runner import check_sandbox

    try:
        check_sandbox("bwrap")
    except WorkspaceError as e:
        pytest.skip(f"no sandbox here: {e}")
    # outside /tmp: the sandbox gives /tmp a private tmpfs, where a write would vanish unseen
    elsewhere = Path(tempfile.mkdtemp(prefix="agent-hook-sandbox-", dir="/var/tmp"))
    try:
        escape = f"open({str(elsewhere / 'escaped')!r}, 'w')"
        rc = agentrc(tmp_path / "user-agentrc", run_end=[py_hook(escape)])
        repo = repo_with(tmp_path / "repo")
        srv = fake_server([plan(task()), make_done(), finish(), no_facts()])
        proc = agent_in_process(
            "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo,
            env={"AGENT_RC": str(rc), "AGENT_SANDBOX": "bwrap"},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not (elsewhere / "escaped").exists()
        hook = next(e for e in events(proc.stdout) if e["event"] == "hook")
        assert hook["outcome"] == "failed" and "Read-only file system" in hook["message"]
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_an_interrupted_run_says_it_runs_its_run_end_hooks_and_a_second_ctrl_c_stops_them(
    spawn_agent, fake_server, tmp_path
):
    started = tmp_path / "run_end.pid"
    slow = f"import os, pathlib, time; pathlib.Path({str(started)!r}).write_text(str(os.getpid())); time.sleep(60)"
    rc = agentrc(tmp_path / "user-agentrc", run_end=[py_hook(slow, timeout_s=90)])
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), {**make_done(), "delay": 60}])
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo, env={"AGENT_RC": str(rc)}
    )
    wait_for(lambda: len(srv.chat_requests) == 2, what="the run waiting for the model")
    os.kill(agent.pid, signal.SIGINT)
    wait_for(lambda: started.exists() and started.read_text(), what="the run_end hook to start")
    wait_for(lambda: "run_end hooks" in agent.stdout, timeout=5, what="the notice")
    (said,) = [e for e in events(agent.stdout) if "run_end hooks" in e.get("text", "")]
    assert said["event"] == "notice"
    assert "at most 90s" in said["text"] and "Ctrl-C again stops them" in said["text"]
    os.kill(agent.pid, signal.SIGINT)
    assert agent.wait(timeout=20) == 130, agent.stdout + agent.stderr
    assert wait_for(lambda: pid_gone(int(started.read_text())), timeout=5, what="the hook gone")


def waits(mark: Path) -> str:
    """A hook that writes its pid to `mark` and then waits a minute."""
    return (
        f"import os, pathlib, time; pathlib.Path({str(mark)!r}).write_text(str(os.getpid())); "
        "time.sleep(60)"
    )


def test_one_ctrl_c_during_a_run_end_hook_stops_it_and_the_finished_run_ends_as_it_ended(
    spawn_agent, fake_server, tmp_path
):
    """The run was over: Ctrl-C stops the hook at work, the later hooks still run, and the
    run's own run_done follows, so its exit code and its worktree's removal are a verified
    run's, not an interrupted one's."""
    started, later = tmp_path / "run_end.pid", tmp_path / "later.json"
    keep = f"import pathlib, sys; pathlib.Path({str(later)!r}).write_text(sys.stdin.read())"
    rc = agentrc(
        tmp_path / "user-agentrc", run_end=[py_hook(waits(started), timeout_s=90), py_hook(keep)]
    )
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), make_done(), finish(), no_facts()])
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--worktree", "--base-url", srv.url,
        cwd=repo, env={"AGENT_RC": str(rc)},
    )  # fmt: skip
    wait_for(lambda: started.exists() and started.read_text(), what="the run_end hook to start")
    os.kill(agent.pid, signal.SIGINT)
    assert agent.wait(timeout=30) == 0, agent.stdout + agent.stderr
    assert wait_for(lambda: pid_gone(int(started.read_text())), timeout=5, what="the hook gone")
    stream = events(agent.stdout)
    hooks = [(e["outcome"], e["exit_code"], e["message"]) for e in stream if e["event"] == "hook"]
    assert hooks == [("failed", None, "stopped by Ctrl-C before it finished"), ("ok", 0, "")]
    (said,) = [e for e in stream if "Ctrl-C stopped a run_end hook" in e.get("text", "")]
    assert "(1, at most 30s); Ctrl-C again stops them" in said["text"], said
    done = stream[-1]
    assert (done["event"], done["status"], done["exit_code"]) == ("run_done", "verified", 0)
    assert [t["status"] for t in done["tasks"]] == ["verified"], done
    assert done["branch"] == f"agent/{done['run_id']}"
    assert json.loads(later.read_text())["outcome"]["status"] == "verified"
    assert not (repo / ".agent" / "worktrees" / done["run_id"]).exists()  # removed, as verified


def test_ctrl_c_in_a_pre_tool_hook_is_its_event_and_a_second_in_run_end_ends_with_the_runs_own(
    spawn_agent, fake_server, tmp_path
):
    """A hook Ctrl-C stopped says so (at pre_tool it blocks: the tool does not run), and the
    second Ctrl-C, which stops the run_end hooks, still ends with the run's run_done."""
    guard, end = tmp_path / "guard.pid", tmp_path / "run_end.pid"
    rc = agentrc(
        tmp_path / "user-agentrc",
        pre_tool=[py_hook(waits(guard), matcher="write_file", timeout_s=90)],
        run_end=[py_hook(waits(end), timeout_s=90), py_hook("open('later-ran', 'w')")],
    )
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), make_done()])
    agent = spawn_agent(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo, env={"AGENT_RC": str(rc)}
    )
    wait_for(lambda: guard.exists() and guard.read_text(), what="the pre_tool hook to start")
    os.kill(agent.pid, signal.SIGINT)
    wait_for(lambda: end.exists() and end.read_text(), what="the run_end hook to start")
    os.kill(agent.pid, signal.SIGINT)
    assert agent.wait(timeout=20) == 130, agent.stdout + agent.stderr
    stream = events(agent.stdout)
    stopped = "stopped by Ctrl-C before it finished"
    hooks = [(e["hook"], e["outcome"], e["blocks"], e["message"]) for e in stream if "hook" in e]
    assert hooks == [("pre_tool", "blocked", True, stopped), ("run_end", "failed", False, stopped)]
    done = stream[-1]
    assert (done["event"], done["status"], done["exit_code"]) == ("run_done", "interrupted", 130)
    assert [t["status"] for t in done["tasks"]] == ["unfinished"], done
    assert done["branch"] == f"agent/{done['run_id']}" and "--resume" in done["message"]
    assert not (repo / "done.txt").exists() and not (repo / "later-ran").exists()
    for mark in (guard, end):
        assert wait_for(lambda m=mark: pid_gone(int(m.read_text())), timeout=5, what="hook gone")


def test_a_resumed_run_holds_its_hooks_scripts_to_the_commit_it_began_at(
    agent_in_process, fake_server, tmp_path
):
    """The model rewrote the guard in the run's first session: resumed, the run must not take
    the rewritten guard for the user's and run it."""
    log = tmp_path / "guard.log"
    repo = repo_with(tmp_path / "repo", {"scripts/guard.sh": f"printf ok >> {log}\n"})
    rc = tmp_path / "user-agentrc"
    rc.write_text(
        '[[hooks.post_tool]]\nmatcher = "read_file"\ncommand = ["sh", "scripts/guard.sh"]\n'
    )
    evil = f"printf EVIL >> {log}\n"
    first = fake_server(
        [
            plan(task()),
            call("read_file", path="README.md"),
            call("write_file", path="scripts/guard.sh", content=evil),
            call("read_file", path="README.md"),
        ]
    )
    stopped = run(agent_in_process, first, repo, rc, "--json", "--max-steps", "3")
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert log.read_text() == "ok"  # once, before the model's write; not after it
    assert (repo / "scripts" / "guard.sh").read_text() == evil  # the work left for the resume
    second = fake_server([call("read_file", path="README.md"), make_done(), finish()])
    resumed = agent_in_process(
        "run",
        "--resume",
        "--yes",
        "--json",
        "--max-steps",
        "20",
        "--base-url",
        second.url,
        cwd=repo,
        env={"AGENT_RC": str(rc)},
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert log.read_text() == "ok"  # the model's guard never ran
    said = [e for e in events(resumed.stdout) if e["event"] == "hook"]
    assert said and all(e["outcome"] == "failed" for e in said), said
    assert "scripts/guard.sh changed since the run started" in said[0]["message"]
