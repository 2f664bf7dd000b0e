"""What batch.json says to run next for each way a run of the batch can end."""

from __future__ import annotations

import pytest

from agent_cli.cli.batch.driver import NOT_STARTED, Job
from agent_cli.cli.batch.goals import Goal


@pytest.mark.parametrize(
    "status, exit_code, resume",
    [
        ("escalated", 3, 'agent run --resume --run-id R --hint "..."'),
        ("interrupted", 130, "agent run --resume --run-id R"),
        ("budget_exhausted", 4, "agent run --resume --run-id R"),
        # finished runs: `agent run --resume` would refuse them
        ("skipped", 3, ""),
        ("verified", 0, ""),
        ("nothing_to_do", 0, ""),
        (NOT_STARTED, None, ""),
    ],
)
def test_only_a_run_that_can_go_on_is_given_a_resume_command(status, exit_code, resume):
    job = Job(index=1, goal=Goal(goal="g"), status=status, run_id="R", exit_code=exit_code)
    assert job.resume_command() == resume
    assert job.record()["resume"] == (resume or None)
