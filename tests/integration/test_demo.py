"""The README demo: the recorded session replayed with no model endpoint at all."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, git

pytestmark = pytest.mark.slow  # the runs' checks and the README's shell block start processes

GOAL = "Add a median function to calc/stats.py so that tests/test_stats.py passes"
REPLAYED = "the model's replies are replayed from the recording"


def test_demo_replays_the_real_loop_without_an_endpoint(agent_in_process, demo_repo):
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # nothing listens there
        "AGENT_FINAL_SUMMARY": "true",
    }  # as a user gets it: the recording ends with it
    proc = agent_in_process(
        "run",
        GOAL,
        "--replay",
        str(FIXTURES / "demo" / "session.jsonl"),
        "--yes",
        cwd=demo_repo,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"-- {REPLAYED}")  # said first, before anything else
    assert "verified" in proc.stdout and "The model's summaries" in proc.stdout
    assert "in the model's words" in proc.stdout and "ValueError for an empty list" in proc.stdout
    assert "completion tokens, $0\n" in proc.stdout  # replayed replies cost nothing
    assert "recalled" not in proc.stdout  # a fresh repository has no earlier runs
    assert "def median" in (demo_repo / "calc" / "stats.py").read_text()
    assert "Agent-Run:" in git(demo_repo, "log", "-1", "--format=%B")
    check = agent_in_process("recall", "median of an empty list", "--json", cwd=demo_repo)
    assert check.returncode == 0 and "median" in check.stdout
    again = agent_in_process(
        "run",
        GOAL,
        "--replay",
        str(FIXTURES / "demo" / "session.jsonl"),
        "--plan-only",
        cwd=demo_repo,
        env=env,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "-- recalled 4 items from earlier runs (episode, fact, note, procedure)" in again.stdout
    ), again.stdout


def readme_demo() -> str:
    """The shell block of the README's demo section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## See it work without a model") :]
    return section[section.index("```sh\n") + 6 : section.index("\n```", section.index("```sh"))]


def test_the_readme_demo_works_twice_in_a_row(agent_env, tmp_path):
    env = {
        **agent_env,
        "TMPDIR": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GIT_AUTHOR_NAME": "Demo",
        "GIT_AUTHOR_EMAIL": "demo@example.com",
        "GIT_COMMITTER_NAME": "Demo",
        "GIT_COMMITTER_EMAIL": "demo@example.com",
    }
    script = readme_demo() + '\npwd > "$TMPDIR/where"\n'
    for _ in range(2):
        proc = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=ROOT,
            env=env,
            text=True,
            capture_output=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith(f"-- {REPLAYED}")
        assert "run " in proc.stdout and "verified (exit code 0)" in proc.stdout
        assert "-- recalled 4 items from earlier runs" in proc.stdout
        assert (tmp_path / "where").read_text().strip() == str(ROOT)  # it came back
    demos = list(tmp_path.glob("tmp.*"))  # mktemp -d
    assert len(demos) == 2 and all((p / "calc" / "stats.py").is_file() for p in demos)


def test_a_columns_of_zero_counts_as_unset_and_the_run_is_shown(agent_in_process, demo_repo):
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "COLUMNS": "0", "LINES": "x"}
    replay = str(FIXTURES / "demo" / "session.jsonl")
    proc = agent_in_process("run", GOAL, "--replay", replay, "--yes", cwd=demo_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"-- {REPLAYED}") and "verified" in proc.stdout
    runs = agent_in_process("runs", cwd=demo_repo, env=env)
    assert runs.returncode == 0 and "verified" in runs.stdout


def test_a_recording_that_cannot_be_written_is_refused_before_any_request(
    agent_in_process, demo_repo, tmp_path
):
    replay = tmp_path / "session.jsonl"
    replay.write_bytes((FIXTURES / "demo" / "session.jsonl").read_bytes())
    before = replay.read_bytes()
    for target, says in ((tmp_path, "cannot be written"), (replay, "the recording --replay reads")):
        proc = agent_in_process(
            "run", GOAL, "--replay", str(replay), "--record", str(target), "--yes", cwd=demo_repo
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert says in proc.stderr and "internal error" not in proc.stderr
    assert replay.read_bytes() == before
    assert "def median" not in (demo_repo / "calc" / "stats.py").read_text()
