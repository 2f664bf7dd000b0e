"""A run stopped between two attempts resumes with the attempts it used still counted.

The stop is made at the instant a kill between attempts would leave the state: right after
the save that follows the first attempt's failure, before the second attempt starts.
"""

from __future__ import annotations

import json

from agent.test_loop import run_in_process
from agent_cli.agent.run.store import RunRecord, RunStore
from reliability.relkit import finish, make_done, plan, repo_with, state_files, task


class StopBetweenAttempts(RunStore):
    """A run store that stops the run once, right after saving a failed attempt."""

    def __init__(self, root) -> None:  # type: ignore[no-untyped-def]
        super().__init__(root)
        self.stopped = False

    def save(self, record: RunRecord, *, durable: bool = True) -> None:
        super().save(record, durable=durable)
        statuses = [t["status"] for t in record.agent_state.get("plan", [])]
        if not self.stopped and "failed" in statuses:
            self.stopped = True
            raise KeyboardInterrupt  # the process ends here, its state on disk as saved


def test_a_run_stopped_between_attempts_resumes_with_one_attempt_left(fake_server, tmp_path):
    repo = repo_with(tmp_path / "repo")
    first = fake_server([plan(task()), make_done("other.txt"), finish()])
    ran = run_in_process(repo, first.url, "Create done.txt", store=StopBetweenAttempts)
    assert ran.code == 130, ran.text
    saved = json.loads(state_files(repo)[-1].read_text())["agent_state"]["plan"][0]
    assert (saved["status"], saved["attempts"]) == ("failed", 1)

    rest = fake_server([make_done(), finish()])
    resumed = run_in_process(repo, rest.url)
    assert resumed.code == 0, resumed.text
    assert [e["attempt"] for e in resumed.of("task_started")] == [2]
    assert resumed.of("run_done")[0]["tasks"][0]["attempts"] == 2


def test_a_run_stopped_between_its_last_attempts_is_rejected_on_resume_without_a_third(
    fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    first = fake_server([plan(task()), make_done("other.txt"), finish()])
    assert run_in_process(repo, first.url, "Create done.txt", store=StopBetweenAttempts).code == 130
    rest = fake_server([make_done("other.txt", "again\n"), finish()])
    resumed = run_in_process(repo, rest.url)
    assert resumed.code == 3, resumed.text
    assert [e["attempt"] for e in resumed.of("task_started")] == [2]
    done = resumed.of("task_done")[0]
    assert (done["status"], done["attempts"]) == ("rejected", 2)
