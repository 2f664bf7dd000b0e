"""The README's "Hooks" section: its configuration is valid, and its worked example (a pre_tool
hook that refuses writes under migrations/) does what it says in a scripted `agent run`."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

from agent_cli.tools.hooks.config import HOOK_EVENTS, HooksConfig
from reliability.relkit import (
    GOAL,
    events,
    finish,
    make_done,
    no_facts,
    plan,
    repo_with,
    task,
    tool_results,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    text = README.read_text()
    start = text.index("\n## Hooks\n")
    return text[start : text.index("\n## ", start + 1)]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(), re.S)


def test_the_readme_configuration_names_the_four_points_and_a_valid_pre_tool_hook():
    tables = tomllib.loads(blocks("toml")[0])["hooks"]
    assert tuple(tables) == HOOK_EVENTS
    config = HooksConfig.model_validate({"pre_tool": tables["pre_tool"]})
    hook = config.pre_tool[0]
    assert hook.timeout_s == 30 and hook.command == ["python", "scripts/guard.py"]
    assert hook.matches("mcp__time__get_current_time") and not hook.matches("read_file")


@pytest.mark.slow  # the hook is a Python script
def test_the_readme_example_refuses_a_write_under_migrations_and_the_model_reads_why(
    agent_in_process, fake_server, tmp_path
):
    config, script = blocks("toml")[1], blocks("python")[0]
    repo = repo_with(tmp_path / "repo", {"scripts/no_migrations.py": script})
    rc = tmp_path / "user-agentrc"
    rc.write_text(config)
    srv = fake_server(
        [
            plan(task()),
            make_done("migrations/0002.sql", "ALTER TABLE t ADD c int;\n"),
            make_done(),
            finish(),
            no_facts(),
        ]
    )
    # "python" in the README's command is this interpreter
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--base-url", srv.url, cwd=repo,
        env={"AGENT_RC": str(rc), "PATH": path},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (repo / "migrations").exists() and (repo / "done.txt").exists()
    said = "migrations/0002.sql is generated: change the models and run `make migrations`"
    blocked = tool_results(srv.chat_requests[2])[0]
    assert "the tool did not run" in blocked and said in blocked
    hooks = [e for e in events(proc.stdout) if e["event"] == "hook"]
    assert [(e["tool"], e["outcome"], e["blocks"]) for e in hooks] == [
        ("write_file", "blocked", True),
        ("write_file", "ok", False),
    ]
    assert said in hooks[0]["message"] and hooks[0]["exit_code"] == 2


@pytest.mark.slow  # the hook is a Python script
def test_a_json_module_the_model_adds_beside_the_readme_example_never_runs_as_the_hook(
    agent_in_process, fake_server, tmp_path
):
    """`import json` in scripts/no_migrations.py would load scripts/json.py (Python puts the
    script's directory first on sys.path): once it appears the guard is not run, and blocks."""
    config, script = blocks("toml")[1], blocks("python")[0]
    repo = repo_with(tmp_path / "repo", {"scripts/no_migrations.py": script})
    rc = tmp_path / "user-agentrc"
    rc.write_text(config)
    mark = tmp_path / "model-code-ran"
    srv = fake_server(
        [
            plan(task()),
            make_done("scripts/json.py", f"open({str(mark)!r}, 'w')\nload = lambda f: {{}}\n"),
            make_done("migrations/0002.sql", "ALTER TABLE t ADD c int;\n"),
            no_facts(),
        ]
    )
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = agent_in_process(
        "run", GOAL, "--yes", "--json", "--max-steps", "2", "--base-url", srv.url, cwd=repo,
        env={"AGENT_RC": str(rc), "PATH": path},
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert not mark.exists() and not (repo / "migrations").exists()
    hooks = [e for e in events(proc.stdout) if e["event"] == "hook"]
    assert [(e["outcome"], e["blocks"]) for e in hooks] == [("ok", False), ("blocked", True)]
    assert "not run: scripts/json.py changed since the run started" in hooks[1]["message"]
