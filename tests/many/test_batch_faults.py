"""A batch when something goes wrong: a run that cannot be started, an error of the batch's own,
a run stopped for the shared budget, a run that fails, a goal that holds a key.

The runs are `manykit.FAKE_RUN` (a `python -c` one-liner that speaks a run's JSON events),
not agents: what is checked is the batch's side of them."""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

from agent_cli.cli.batch import runner
from agent_cli.cli.batch.driver import Batch, Launch
from agent_cli.cli.batch.goals import Goal
from agent_cli.cli.batch.runner import rows
from agent_cli.core.redact import MASK
from agent_cli.ui.batch_view import BatchView
from many.manykit import FAKE_ARGV0
from reliability.relkit import repo_with


def _batch(tmp_path: Path, goals: list[Goal], budget: float | None = None, **shown) -> Batch:
    launch = Launch(tmp_path, tmp_path, tmp_path / "batch", argv0=FAKE_ARGV0)
    return Batch(
        goals,
        launch,
        2,
        budget,
        on_event=shown.get("on_event", lambda job, ev: None),
        on_change=shown.get("on_change", lambda jobs: None),
    )


def test_a_goal_whose_run_cannot_be_started_fails_with_the_systems_reason_and_the_rest_go_on(
    tmp_path,
):
    (tmp_path / "batch" / "2.events.jsonl").mkdir(parents=True)  # its events cannot be kept
    too_long = "x" * 200_000  # more than the system takes in one argument: E2BIG
    goals = [
        Goal(goal="one"),
        Goal(goal="two"),
        Goal.model_construct(goal="three", accept=(too_long,), max_steps=None, budget_usd=None),
        Goal(goal="four"),
    ]
    done: list[tuple[int, str]] = []
    batch = _batch(
        tmp_path,
        goals,
        on_event=lambda job, ev: (
            done.append((job.index, ev["status"])) if ev["event"] == "job_done" else None
        ),
    )
    assert batch.run() == 1
    assert [j.status for j in batch.jobs] == ["verified", "failed", "failed", "verified"]
    two, three = batch.jobs[1], batch.jobs[2]
    events = tmp_path / "batch" / "2.events.jsonl"
    assert two.message == f"its run could not be started: Is a directory (EISDIR): {events}"
    assert three.message.startswith(
        "its run could not be started: Argument list too long (E2BIG): "
    )
    assert sorted(done) == [(1, "verified"), (2, "failed"), (3, "failed"), (4, "verified")]
    assert (two.exit_code, two.record()["message"]) == (None, two.message)
    # the summary says why, in the line of what to do next
    assert [r.note for r in rows(batch.jobs)][1:3] == [two.message, three.message]


def test_a_run_stopped_for_the_shared_budget_is_said_budget_exhausted_in_its_progress_line(
    tmp_path, capsys
):
    view = BatchView("batch")
    batch = _batch(  # each run is given $0.50; they spend $0.60 together, and are stopped
        tmp_path,
        [Goal(goal="costly a"), Goal(goal="costly b")],
        budget=0.5,
        on_change=lambda jobs: view.update(rows(jobs)),
    )
    assert batch.run() == 4
    assert [(j.status, j.exit_code) for j in batch.jobs] == [("budget_exhausted", 130)] * 2
    out = capsys.readouterr().out
    for job in batch.jobs:
        line = f"[{job.index}/2] budget_exhausted: {job.goal.goal} (run {job.run_id})"
        assert line in out.splitlines(), out
    assert "interrupted" not in out, out


def _fake_runs(monkeypatch) -> None:
    """Every run the batch starts is a FAKE_RUN."""
    monkeypatch.setattr(runner, "Launch", partial(Launch, argv0=FAKE_ARGV0))


def test_a_failed_runs_reason_and_the_keys_in_goals_are_shown_masked(
    agent_in_process, fake_server, monkeypatch, tmp_path
):
    _fake_runs(monkeypatch)
    repo = repo_with(tmp_path / "repo")
    shaped = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12"  # a known key shape
    role = "exec-role-secret-0123456789abcdef"  # the executor's own key
    file = tmp_path / "goals.jsonl"
    file.write_text("".join(json.dumps({"goal": f"fails: use {k}"}) + "\n" for k in (shaped, role)))
    srv = fake_server()
    env = {"AGENT_EXECUTOR_API_KEY_ENV": "EXEC_KEY", "EXEC_KEY": role}
    proc = agent_in_process(
        "batch", str(file), "--yes", "--base-url", srv.url, cwd=repo, env=env
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert shaped not in said and role not in said, said
    lines = said.splitlines()
    assert f"[1/2] failed: fails: use {MASK}" in {line.split(" (run")[0] for line in lines}
    record = json.loads(Path(lines[-1]).read_text())
    for n, run in enumerate(record["runs"], 1):
        # the reason, one line, before how to resume
        note = f"{n}. model 'nope' is not served for fails: use {MASK}; {run['resume']}"
        assert note in " ".join(said.split()), said  # as one line, however wide the terminal
        assert run["message"] == f"model 'nope' is not served\nfor fails: use {MASK}"


def test_an_error_of_the_batch_own_stops_its_runs_as_ctrl_c_does_and_writes_the_record(
    agent_in_process, fake_server, monkeypatch, tmp_path
):
    _fake_runs(monkeypatch)

    def broken(self, rows):  # a fault of the batch's own output, once both runs are going
        if sum(r.status == "running" for r in rows) == 2:
            raise RuntimeError("the view broke")

    monkeypatch.setattr(BatchView, "update", broken)
    repo = repo_with(tmp_path / "repo")
    file = tmp_path / "goals.toml"
    file.write_text("".join(f'[[goals]]\ngoal = "{g}"\n' for g in ("waits a", "waits b", "c")))
    srv = fake_server()
    began = time.monotonic()
    proc = agent_in_process("batch", str(file), "--yes", "--base-url", srv.url, cwd=repo)
    assert time.monotonic() - began < 30  # not the 60 s a run that does not stop gets
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "internal error: RuntimeError: the view broke" in line
    record = json.loads(Path(proc.stdout.strip().splitlines()[-1]).read_text())
    assert record["error"] == "internal error: RuntimeError: the view broke"
    assert record["exit_code"] == 1
    runs = record["runs"]
    # each run took SIGTERM and saved its state (its own run_done, exit 130): none was killed
    assert [(r["status"], r["exit_code"]) for r in runs] == [
        ("interrupted", 130),
        ("interrupted", 130),
        ("not_started", None),
    ]
    assert [r["message"] for r in runs] == ["stopped", "stopped", "the batch stopped on an error"]
