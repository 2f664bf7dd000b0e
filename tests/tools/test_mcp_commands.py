"""`agent mcp list`, `agent doctor`'s server lines, and a stdio server under bubblewrap."""

from __future__ import annotations

import json
import shutil
import sys
import unicodedata

import pytest

from agent_cli.cli.config.settings import load_settings
from agent_cli.cli.mcp_tools import build_tools
from agent_cli.workspace.shell.runner import check_sandbox
from conftest import DOCTOR_REPLIES, make_repo
from tools.mcpkit import FIXTURE, fixture_server, pids, toml_table, wait_gone

pytestmark = pytest.mark.slow


def write_rc(tmp_path, servers: dict[str, dict], extra: str = "") -> str:
    rc = tmp_path / "user-agentrc"
    rc.write_text(extra + "".join(toml_table(n, t) for n, t in servers.items()))
    return str(rc)


def test_mcp_list_shows_each_server_without_asking_the_model(agent_in_process, tmp_path):
    repo = make_repo(tmp_path / "repo")
    pid_file = tmp_path / "pids"
    rc = write_rc(
        tmp_path,
        {
            "fx": fixture_server(pid_file, enabled_tools=["echo", "nap", "ech0"]),
            "gone": {"command": "no-such-mcp-server-binary"},
            "off": fixture_server(pid_file, enabled=False),
        },
    )
    env = {"AGENT_RC": rc, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing listens
    listed = agent_in_process("mcp", "list", "--json", cwd=repo, env=env)
    assert listed.returncode == 1, listed.stderr  # a server failed
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["fx"] == {
        "name": "fx",
        "transport": "stdio",
        "status": "ready",
        "tools": ["echo", "nap"],
        "left_out": [],
        "unlisted": ["ech0"],  # a name the server does not list is said, not ignored
    }
    assert rows["gone"]["status"].startswith("failed") and "not found" in rows["gone"]["status"]
    assert rows["off"]["status"] == "disabled"
    text = agent_in_process("mcp", "list", cwd=repo, env=env)
    assert "fx: stdio, ready; echo, nap; not listed by the server: ech0" in text.stdout
    assert "Traceback" not in text.stderr
    assert len(pids(pid_file)) == 2 and wait_gone(pids(pid_file)) == []


def test_a_server_without_tools_is_ready_with_none(agent_in_process, tmp_path):
    """A server that declares no `tools` capability (prompts only) refuses `tools/list` as the
    protocol lets it: that is a server with no tools, not one that failed to start."""
    repo = make_repo(tmp_path / "repo")
    server = {"command": sys.executable, "args": [str(FIXTURE.with_name("mcp_prompts_server.py"))]}
    env = {"AGENT_RC": write_rc(tmp_path, {"prompts": server})}
    listed = agent_in_process("mcp", "list", "--json", cwd=repo, env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["status"], row["tools"]) == ("ready", [])


def test_doctor_lists_each_server_with_its_transport_status_and_tools(
    agent_in_process, fake_server, tmp_path
):
    repo = make_repo(tmp_path / "repo")
    pid_file = tmp_path / "pids"
    rc = write_rc(tmp_path, {"fx": fixture_server(pid_file, enabled_tools=["echo"])})
    srv = fake_server(DOCTOR_REPLIES, models=("gpt-4o-mini",))
    env = {"AGENT_RC": rc, "OPENAI_API_KEY": "sk-doctor-test-key-1234567890"}
    proc = agent_in_process("doctor", "--base-url", srv.url, cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "mcp fx" in x)
    assert "ok" in line and "stdio, ready; echo" in line
    assert wait_gone(pids(pid_file)) == []


def test_an_untrusted_repository_s_server_is_never_started(agent_in_process, tmp_path):
    repo = make_repo(tmp_path / "repo")
    pid_file = tmp_path / "pids"
    (repo / ".agentrc").write_text(toml_table("planted", fixture_server(pid_file)))
    env = {"AGENT_TRUST_FILE": str(tmp_path / "trusted.json")}
    listed = agent_in_process("mcp", "list", "--json", cwd=repo, env=env)
    assert json.loads(listed.stdout) == [] and "mcp_servers ignored" in listed.stderr
    assert pids(pid_file) == []


def _bwrap_or_skip() -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    try:
        check_sandbox("bwrap")
    except Exception as e:  # user namespaces off: the sandbox cannot be made here
        pytest.skip(str(e))


def test_with_sandbox_bwrap_a_stdio_server_runs_inside_bubblewrap(tmp_path):
    _bwrap_or_skip()
    repo = make_repo(tmp_path / "repo")
    pid_file = repo / "server.pid"  # the repository is the sandbox's one writable place
    rc = tmp_path / "rc"
    # the server's script inside the repository: the sandbox shows it, wherever the tests live
    script = repo / "mcp_server.py"
    shutil.copy(FIXTURE, script)
    table = {**fixture_server(pid_file), "args": [str(script), "--pid-file", str(pid_file)]}
    rc.write_text('sandbox = "bwrap"\n' + toml_table("fx", table))
    settings = load_settings(repo, None, {}, rc)
    notices: list[str] = []
    tools = build_tools(settings, repo, settings.state_dir(repo), notices.append)
    assert tools is not None
    try:
        (status,) = tools.start()
        assert status.status == "ready", notices
        assert f"cwd={repo}" in tools.call("mcp__fx__echo", {"text": "boxed"}).text
        assert pids(pid_file)[0] < 10  # its own pid namespace: bwrap is pid 1 there
    finally:
        tools.close()


def test_mcp_list_shows_what_servers_said_without_terminal_escapes(agent_in_process, tmp_path):
    raw = FIXTURE.parent / "mcp_raw_server.py"
    config = tmp_path / "raw.json"
    evil = "evil\x1b[31mRED\x1b]0;TITLE\x07\x1b[2J"
    forged = "x\nFAKE: stdio, ready; all is fine"  # a line of its own, were it printed as it is
    hidden = "zw\u200bsp\u2028ls\u202eRLO\ufeff"  # drawn as nothing, a break, a reversal
    config.write_text(
        json.dumps(
            {
                "tools": [
                    {"name": n, "inputSchema": {"type": "object"}} for n in (evil, forged, hidden)
                ]
            }
        )
    )
    rc = write_rc(
        tmp_path,
        {
            "raw": {"command": sys.executable, "args": [str(raw), str(config)]},
            "dies": {
                "command": "sh",
                "args": [
                    "-c",
                    "printf 'boom \\033]0;PWNED\\007\\033[2J\\033[31mred\\r\\n' >&2; exit 3",
                ],
            },
        },
    )
    repo = make_repo(tmp_path / "repo")
    text = agent_in_process("mcp", "list", cwd=repo, env={"AGENT_RC": rc})
    listed = agent_in_process("mcp", "list", "--json", cwd=repo, env={"AGENT_RC": rc})
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["raw"]["tools"] == [  # offered as mcp__raw__evil_31mRED_0_TITLE_…
        "evilRED",
        "x\\nFAKE: stdio, ready; all is fine",  # the line break shown as its escape
        "zw\\u200bsp\\u2028lsRLO\\ufeff",
    ]
    assert "boom" in rows["dies"]["status"] and "red" in rows["dies"]["status"]
    assert "PWNED" not in rows["dies"]["status"]  # a terminal title, with its payload
    for shown in (text.stdout, json.dumps(rows, ensure_ascii=False)):
        assert not any(ord(c) < 32 and c != "\n" for c in shown), repr(shown)
    assert "ready; evilRED" in text.stdout
    assert [line.split(":")[0] for line in text.stdout.splitlines()] == ["dies", "raw"]
    assert not any(unicodedata.category(c) in ("Cf", "Zl", "Zp") for c in text.stdout)


def test_doctor_s_line_of_a_server_holds_what_it_said_on_one_line_without_format_characters():
    from agent_cli.cli.mcp_tools import status_text
    from agent_cli.tools.mcp.provider import ServerStatus

    said = ServerStatus(
        name="s",
        transport="stdio",
        status="failed: boom\u2028  ok   mcp fake\u200b\nready",
        tools=["a\nb"],
        left_out=["c\u2029d"],
    )
    line = status_text(said)
    assert line == "stdio, failed: boom ok mcp fake\\u200b ready; a\\nb; left out: c\\u2029d"
