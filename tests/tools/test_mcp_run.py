"""A scripted `agent run` (the loopback model server) with real MCP servers: the tools are
offered, a result reaches the next request fenced, approval is asked on a terminal, deny_tools
refuses, failing servers end in a notice with the run going on, and no server outlives it."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from ptykit import pty_agent  # noqa: F401 (fixture)

from reliability.relkit import (
    call,
    events,
    finish,
    make_done,
    plan,
    repo_with,
    spawn_agent,  # noqa: F401 (fixture)
    task,
    tool_results,
    wait_for,
)
from tools.mcpkit import fixture_server, http_server, pids, toml_table, wait_gone  # noqa: F401

pytestmark = pytest.mark.slow


def user_rc(tmp_path, servers: dict[str, dict], **keys) -> str:
    rc = tmp_path / "user-agentrc"
    rc.write_text(
        "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
        + "".join(toml_table(name, table) for name, table in servers.items())
    )
    return str(rc)


def test_a_run_calls_mcp_tools_and_survives_servers_that_fail(
    agent_in_process, fake_server, tmp_path, http_server
):
    url, token = http_server
    repo = repo_with(tmp_path / "repo")
    pid_file = tmp_path / "pids"
    rc = user_rc(
        tmp_path,
        {
            "fx": fixture_server(pid_file),
            "crashy": fixture_server(pid_file),
            "sleepy": fixture_server(pid_file, tool_timeout_s=2),
            "time": {
                "command": sys.executable,
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                "startup_timeout_s": 30,
                "enabled_tools": ["get_current_time"],
            },
            "web": {"url": url, "bearer_token_env_var": "WEB_MCP_TOKEN"},
        },
        deny_tools=["mcp__fx__fail*"],
    )
    srv = fake_server(
        [
            plan(task()),
            call("mcp__fx__echo", text="hello from the model"),
            call("mcp__fx__fail", why="never"),
            call("mcp__crashy__crash"),
            call("mcp__sleepy__nap", seconds=30),
            call("mcp__time__get_current_time", timezone="UTC"),
            call("mcp__web__echo", text="over http"),
            call("mcp__crashy__echo", text="again"),
            make_done(),
            finish(),
        ]
    )
    proc = agent_in_process(
        "run",
        "Create done.txt",
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        cwd=repo,
        env={"AGENT_RC": rc, "WEB_MCP_TOKEN": token},
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    offered = [t["function"]["name"] for t in srv.chat_requests[1]["tools"]]
    assert "mcp__fx__echo" in offered and "mcp__time__get_current_time" in offered
    assert offered.index("finish") < offered.index("mcp__crashy__crash")  # built-ins first
    for request in srv.chat_requests[2:10]:  # fixed for the run: the cache prefix holds
        assert [t["function"]["name"] for t in request["tools"]] == offered

    def result(step: int) -> str:
        return tool_results(srv.chat_requests[step + 1])[-1]

    assert result(1).startswith('<tool_output name="mcp__fx__echo">')
    assert "echo: hello from the model" in result(1)
    assert "deny_tools" in result(2) and "never run" in result(2)
    assert "closed the connection" in result(3) and "crashing on purpose" in result(3)
    assert "tool_timeout_s = 2s" in result(4)
    assert '"timezone": "UTC"' in result(5)
    assert "echo: over http" in result(6)
    assert "unavailable for the rest of this run" in result(7)
    evs = events(proc.stdout)
    notices = [e["text"] for e in evs if e["event"] == "notice"]
    for name in ("crashy", "sleepy"):
        assert len([n for n in notices if n.startswith(f"MCP server {name} ")]) == 1, notices
    ran = [(e["name"], e["ok"]) for e in evs if e["event"] == "tool_result"]
    assert ("mcp__fx__echo", True) in ran and ("mcp__fx__fail", False) in ran
    assert [e["name"] for e in evs if e["event"] == "tool_call"].count("mcp__fx__echo") == 1
    assert token not in proc.stdout + proc.stderr + json.dumps(srv.chat_requests)
    assert "Traceback" not in proc.stderr
    assert len(pids(pid_file)) == 3 and wait_gone(pids(pid_file)) == []


def test_on_a_terminal_the_user_is_asked_and_no_is_a_tool_error(pty_agent, fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    pid_file = tmp_path / "pids"
    rc = user_rc(tmp_path, {"fx": fixture_server(pid_file)})
    srv = fake_server(
        [
            plan(task()),
            call("mcp__fx__echo", text="first"),
            call("mcp__fx__echo", text="second"),
            call("mcp__fx__echo", text="third"),
            make_done(),
            finish(),
        ]
    )
    agent = pty_agent(
        "run", "Create done.txt", "--base-url", srv.url, cwd=repo, env={"AGENT_RC": rc}
    )
    agent.expect("Run this plan?")
    agent.type("y\n")
    agent.expect('mcp__fx__echo {"text": "first"}')
    agent.expect("[a]lways this tool of this server")
    agent.type("n\n")
    agent.expect('mcp__fx__echo {"text": "second"}')
    agent.type("a\n")
    assert agent.wait() == 0, agent.text
    assert 'mcp__fx__echo {"text": "third"}' not in agent.text  # "a": always this tool
    assert "mcp__fx__echo" in agent.text.split('"second"')[-1]  # each call is a log line
    declined = tool_results(srv.chat_requests[2])[-1]
    assert "the user declined to run this tool" in declined
    assert "echo: second" in tool_results(srv.chat_requests[3])[-1]
    assert "echo: third" in tool_results(srv.chat_requests[4])[-1]
    assert len(pids(pid_file)) == 1 and wait_gone(pids(pid_file)) == []


def test_a_run_stopped_by_sigterm_mid_call_leaves_no_server_running(
    spawn_agent, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    pid_file = tmp_path / "pids"
    rc = user_rc(tmp_path, {"fx": fixture_server(pid_file, tool_timeout_s=120)})
    srv = fake_server([plan(task()), call("mcp__fx__nap", seconds=100), finish()])
    agent = spawn_agent(
        "run",
        "Create done.txt",
        "--yes",
        "--json",
        "--base-url",
        srv.url,
        cwd=repo,
        env={"AGENT_RC": rc},
    )
    wait_for(lambda: '"mcp__fx__nap"' in agent.stdout, 60, "the MCP call to start")
    time.sleep(0.5)
    started = time.monotonic()
    os.kill(agent.pid, signal.SIGTERM)
    assert agent.wait(60) == 130, agent.stderr
    # The call in flight is cut, not waited out (the nap is 100 s). Stopping the server takes
    # the MCP SDK's own 2 s waits; on a loaded machine the whole exit has taken over 15 s.
    assert time.monotonic() - started < 50
    assert len(pids(pid_file)) == 1 and wait_gone(pids(pid_file)) == []


def test_ctrl_c_while_the_servers_start_leaves_no_branch_and_nothing_half_made(
    spawn_agent, fake_server, tmp_path
):
    from conftest import git

    repo = repo_with(tmp_path / "repo")
    pid_file = tmp_path / "pids"
    hang = fixture_server(pid_file, "--hang", startup_timeout_s=600)
    rc = user_rc(tmp_path, {"slow": hang})
    srv = fake_server([plan(task()), make_done(), finish()])
    agent = spawn_agent(
        "run", "Create done.txt", "--yes", "--json", "--base-url", srv.url,
        cwd=repo, env={"AGENT_RC": rc},
    )  # fmt: skip
    wait_for(lambda: pids(pid_file), 60, "the MCP server to be started")
    time.sleep(0.5)
    started = time.monotonic()
    os.kill(agent.pid, signal.SIGINT)
    assert agent.wait(60) == 130, agent.stderr
    assert time.monotonic() - started < 8  # the start is cut short, not waited out
    done = events(agent.stdout)[-1]
    assert done["event"] == "run_done" and done["status"] == "interrupted"
    assert "never retrieved" not in agent.stderr and "Traceback" not in agent.stderr
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git(repo, "branch", "--list", "agent/*").strip() == ""  # no run was begun
    assert not list((repo / ".agent" / "runs").glob("*/state.json"))
    assert wait_gone(pids(pid_file)) == []


def test_a_server_with_more_tools_than_the_window_holds_is_left_out_and_the_run_goes_on(
    agent_in_process, fake_server, tmp_path
):
    config = tmp_path / "many.json"
    tools = [
        {"name": f"tool_{n}", "description": "word " * 150, "inputSchema": {"type": "object"}}
        for n in range(80)
    ]
    config.write_text(json.dumps({"tools": tools}))
    raw = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_raw_server.py"
    rc = user_rc(tmp_path, {"many": {"command": sys.executable, "args": [str(raw), str(config)]}})
    repo = repo_with(tmp_path / "repo")
    srv = fake_server([plan(task()), make_done(), finish()])
    proc = agent_in_process(
        "run", "Create done.txt", "--yes", "--json", "--base-url", srv.url,
        cwd=repo, env={"AGENT_RC": rc, "AGENT_CONTEXT_WINDOW": "32000"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notices = [e["text"] for e in events(proc.stdout) if e["event"] == "notice"]
    assert any("MCP server many: 80 tools left out" in n for n in notices), notices
    offered = {t["function"]["name"] for r in srv.chat_requests for t in r.get("tools") or []}
    assert not any(name.startswith("mcp__many__") for name in offered)


def test_a_bearer_token_reaches_its_server_only_never_a_command_hook_or_the_model(
    agent_in_process, fake_server, tmp_path, http_server
):
    url, token = http_server
    repo = repo_with(tmp_path / "repo")
    seen_by_hook = tmp_path / "hook-env"
    rc = user_rc(
        tmp_path,
        {
            "docs": {"url": url, "bearer_token_env_var": "DOCS_MCP_CRED"},  # no secret's name
            "fx": fixture_server(tmp_path / "pids"),
        },
    )
    with open(rc, "a") as f:
        f.write(
            "[[hooks.pre_tool]]\n"
            f'command = ["sh", "-c", "echo ${{DOCS_MCP_CRED:-unset}} >> {seen_by_hook}"]\n'
        )
    srv = fake_server(
        [
            plan(task()),
            call("run", cmd="echo cred=${DOCS_MCP_CRED:-unset}"),
            call("mcp__fx__getenv", variable="DOCS_MCP_CRED"),
            call("mcp__docs__echo", text=f"said {token}"),
            make_done(),
            finish(),
        ]
    )
    proc = agent_in_process(
        "run", "Create done.txt", "--yes", "--json", "--base-url", srv.url,
        cwd=repo, env={"AGENT_RC": rc, "DOCS_MCP_CRED": token},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cred=unset" in tool_results(srv.chat_requests[2])[-1]
    assert "DOCS_MCP_CRED=unset" in tool_results(srv.chat_requests[3])[-1]
    assert "echo: said [REDACTED]" in tool_results(srv.chat_requests[4])[-1]  # it connected
    assert set(seen_by_hook.read_text().split()) == {"unset"}
    stored = "".join(p.read_text() for p in (repo / ".agent" / "runs").rglob("*.json*"))
    assert "trajectory" in str(list((repo / ".agent" / "runs").rglob("*.jsonl")))
    for where in (json.dumps(srv.chat_requests), stored, proc.stdout, proc.stderr):
        assert token not in where


def test_a_resumed_run_does_not_start_a_server_whose_file_the_model_changed(
    agent_in_process, fake_server, tmp_path
):
    """The model rewrote a repository file a stdio server runs before the run stopped: the
    resumed run must not start it as the user's server."""
    from tools.mcpkit import FIXTURE

    mark = tmp_path / "evil-ran"
    server = f"import runpy, sys\nsys.argv[0] = {str(FIXTURE)!r}\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"
    repo = repo_with(tmp_path / "repo", {"tools/server.py": server})
    rc = user_rc(tmp_path, {"local": {"command": sys.executable, "args": ["tools/server.py"]}})
    evil = f"open({str(mark)!r}, 'w').write('EVIL')\n" + server
    first = fake_server(
        [
            plan(task()),
            call("write_file", path="tools/server.py", content=evil),
            call("read_file", path="README.md"),
        ]
    )
    stopped = agent_in_process(
        "run", "Create done.txt", "--yes", "--json", "--max-steps", "2", "--base-url", first.url,
        cwd=repo, env={"AGENT_RC": rc},
    )  # fmt: skip
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    offered = [t["function"]["name"] for t in first.chat_requests[1]["tools"]]
    assert "mcp__local__echo" in offered  # the user's server ran while the file was theirs
    assert (repo / "tools" / "server.py").read_text() == evil and not mark.exists()
    second = fake_server([make_done(), finish()])
    resumed = agent_in_process(
        "run", "--resume", "--yes", "--json", "--max-steps", "20", "--base-url", second.url,
        cwd=repo, env={"AGENT_RC": rc},
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert not mark.exists()  # the model's server never ran
    notices = [e["text"] for e in events(resumed.stdout) if e["event"] == "notice"]
    assert any(
        n.startswith("MCP server local: not started: tools/server.py changed since the run began")
        for n in notices
    ), notices
