"""`agent batch` on a real terminal: the live table while the runs go, Ctrl-C, the summary."""

from __future__ import annotations

import json

from ptykit import pty_agent

from agent_cli.llm.fake.routes import ByGoal
from many.manykit import creates, goal_of, state
from reliability.relkit import repo_with, wait_for

__all__ = ["pty_agent"]


def test_the_live_table_then_ctrl_c_stops_the_runs_and_the_summary_says_how(
    pty_agent, fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    names = ["one.txt", "two.txt"]
    srv = fake_server(
        ByGoal({goal_of(n): creates(n)[:1] + [{**creates(n)[1], "delay": 60}] for n in names})
    )
    file = tmp_path / "goals.toml"
    file.write_text("".join(f'[[goals]]\ngoal = "{goal_of(n)}"\n' for n in names))
    agent = pty_agent(
        "batch", str(file), "--jobs", "2", "--yes", "--base-url", srv.url,
        cwd=repo, env={"NO_COLOR": "", "COLUMNS": "160"},
    )  # fmt: skip
    agent.expect("2 goals, 2 at a time")
    agent.expect("running", timeout=90)
    wait_for(lambda: srv.in_flight == 2, timeout=90, what="both runs waiting on the model")
    agent.type("\x03")
    assert agent.wait(timeout=90) == 130
    path = next((repo / ".agent" / "batches").glob("*/batch.json"))
    assert agent.text.strip().splitlines()[-1].strip() == str(path)  # its path, last
    assert "2 goals: 2 interrupted (exit code 130)" in agent.text
    runs = json.loads(path.read_text())["runs"]
    assert all(state(repo, r["run_id"])["status"] == "interrupted" for r in runs)
    assert all("agent run --resume --run-id" in (r["resume"] or "") for r in runs)


def test_the_summary_shows_run_ids_and_what_to_do_next_whole_at_any_width():
    from rich.console import Console

    from agent_cli.ui.batch_view import BatchRow, batch_table, next_lines

    resume = "agent run --resume --run-id 20261206-101010-abcd --hint 'TEXT'"
    rows = [
        BatchRow(
            1, "Add a median function", "escalated", 1, 2, 9, 0.0, "20261206-101010-abcd", resume
        )
    ]
    for width in (60, 80, 160):
        console = Console(width=width, record=True, color_system=None)
        console.print(batch_table(rows, "batch", notes=True))
        for line in next_lines(rows):
            console.print(line, overflow="fold")
        text = console.export_text()
        assert "20261206-101010-abcd" in text, (width, text)
        assert f"1. {resume}" in " ".join(text.split()), (width, text)
