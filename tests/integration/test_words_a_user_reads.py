"""What a user reads first: one-line usage errors, flags named as typed, help that matches the README."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from agent_cli.cli.app import app, main
from agent_cli.core.events import RunDone
from agent_cli.ui.render import outcome_line, settings_view
from conftest import SECRET_ENV

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.fixture
def agent(agent_env, monkeypatch, capsys):
    """Run `agent ARGS` in this process as the console entry point does: (exit code, out, err)."""
    for name in [k for k in os.environ if k.startswith("AGENT_") or k in SECRET_ENV]:
        monkeypatch.delenv(name)
    for name, value in agent_env.items():
        monkeypatch.setenv(name, value)

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as done:
            main(list(args))
        captured = capsys.readouterr()
        return done.value.code or 0, captured.out, captured.err

    return run


@pytest.mark.parametrize(
    "args, closest",
    [
        (["run", "--max-stepz", "3", "goal"], "--max-steps"),
        (["run", "--budget", "1", "goal"], "--budget-usd"),
        (["recall", "--min-trus", "0.5", "q"], "--min-trust"),
    ],
)
def test_a_mistyped_flag_is_one_line_naming_the_closest_flag(agent, args, closest):
    code, out, err = agent(*args)
    assert code == 2 and not out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"did you mean {closest}" in lines[0] and f"agent {args[0]} --help" in lines[0]


def test_an_unknown_command_is_one_line_and_no_arguments_still_show_the_help(agent):
    code, _, err = agent("recal", "x")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "recal" in err
    code, _, err = agent()
    assert code == 2 and "Commands:" in err and "recall" in err


def test_a_bad_flag_value_names_the_flag_as_the_user_typed_it(agent, tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    code, _, err = agent("run", "--repo", str(tmp_path), "--max-steps", "-3", "goal")
    assert code == 2, err  # the command line is wrong: a usage error
    assert "error: --max-steps: input should be greater than or equal to 1 (got -3)" in err
    assert "flag: key" not in err


def _run_done(status: str, code: int, message: str) -> RunDone:
    return RunDone(
        run_id="r1", status=status, exit_code=code, tasks=[], steps=0, prompt_tokens=0,
        completion_tokens=0, cost_usd=0.0, message=message,
    )  # fmt: skip


def test_the_last_line_says_the_status_once():
    assert (
        outcome_line(_run_done("interrupted", 130, "interrupted before the run started"))
        == "run r1 (exit code 130): interrupted before the run started"
    )
    assert (
        outcome_line(_run_done("escalated", 3, "task 2 needs you"))
        == "run r1 escalated (exit code 3): task 2 needs you"
    )
    assert outcome_line(_run_done("verified", 0, "")) == "run r1 verified (exit code 0)"


def test_doctor_aligns_every_key_and_spells_booleans_as_toml():
    values = {"final_summary": True, "price_cached_input_per_mtok": None, "model": "m"}
    lines = [line.plain for line in settings_view(values, {})[1:]]
    starts = {line.index(line.split()[1], len(line.split()[0]) + 2) for line in lines}
    assert len(starts) == 1, lines  # every value begins in the same column
    assert "true" in lines[0] and "True" not in lines[0]


def _readme_row(command: str) -> str:
    row = re.search(rf"^\| `agent {re.escape(command)}[ `](?:[^|]|\\\|)*\| (.+) \|$", README, re.M)
    assert row, f"README has no row for `agent {command}`"
    return row.group(1)


def _words(text: str) -> str:
    text = re.sub(r"\([^)]*\)", "", text.replace("`", ""))
    return " ".join(text.lower().rstrip(".").split())


def _commands() -> list[tuple[str, str]]:
    import typer.main

    root = typer.main.get_command(app)
    found = []
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        if subs:
            found += [(f"{name} {sub}", c.short_help) for sub, c in subs.items()]
        elif command.short_help:
            found.append((name, command.short_help))
    return found


@pytest.mark.parametrize("command, short_help", _commands())
def test_each_command_says_in_its_help_what_the_readme_says(command, short_help):
    assert _words(_readme_row(command)).startswith(_words(short_help)), (command, short_help)
