"""The README demo: the recorded session replayed with no model endpoint at all."""

import os
import sys
from pathlib import Path

from conftest import FIXTURES, git

GOAL = "Add a median function to calc/stats.py so that tests/test_stats.py passes"


def test_demo_replays_the_real_loop_without_an_endpoint(run_agent, demo_repo):
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # nothing listens there
           "AGENT_FINAL_SUMMARY": "true"}  # as a user gets it: the recording ends with it
    proc = run_agent("run", GOAL, "--replay", str(FIXTURES / "demo" / "session.jsonl"), "--yes",
                     cwd=demo_repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verified" in proc.stdout and "The model's summaries" in proc.stdout
    assert "in the model's words" in proc.stdout and "ValueError for an empty list" in proc.stdout
    assert "def median" in (demo_repo / "calc" / "stats.py").read_text()
    assert "Agent-Run:" in git(demo_repo, "log", "-1", "--format=%B")
    check = run_agent("recall", "median of an empty list", "--json", cwd=demo_repo)
    assert check.returncode == 0 and "median" in check.stdout
