"""`agent run --resume` holds its run from the moment it has chosen it: its own lock is taken
before the run's state is read, so no `agent clean` or other resume acts on the run between the
choice and the lock, and a run finished by then is said in one line, with nothing written."""

from __future__ import annotations

from agent_cli.agent.run.store import RunStore
from agent_cli.cli import wiring
from agent_cli.cli.app import main
from agent_cli.cli.commands import runs_commands
from many.manykit import branch_files, hinted, resume_hinted, state, status
from many.test_worktree_runs import rejected_worktree_run, run_done
from reliability.relkit import events, no_facts, repo_with, snapshot


def test_clean_force_while_a_resume_gets_ready_keeps_the_tree_it_goes_on_in(
    agent_in_process, fake_server, tmp_path, monkeypatch
):
    """`agent clean --force --branches` runs (here, in this process) right before the run's
    session starts, where the resume used to take its lock: the run is held from its choice on,
    so clean keeps its tree and the resume goes on in it."""
    repo = repo_with(tmp_path / "repo")
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "eta.txt")
    said: list[str] = []
    session = wiring.run_session

    def clean_first(*args, **kwargs):
        place = runs_commands.open_place(repo)
        try:
            said.extend(runs_commands.clean(place, branches=True, force=True))
        finally:
            place.git.close()
        return session(*args, **kwargs)

    monkeypatch.setattr(wiring, "run_session", clean_first)
    rest = fake_server(hinted("eta.txt"))
    again = resume_hinted(agent_in_process, rest.url, run_id, repo)
    assert said == [f"kept {tree}: run {run_id} is in progress"]
    assert again.returncode == 0, again.stdout + again.stderr
    assert run_done(again.stdout)["status"] == "verified"
    assert "eta.txt" in branch_files(repo, f"agent/{run_id}")


def test_a_run_another_resume_finished_after_it_was_chosen_is_said_finished_and_left_alone(
    agent_in_process, fake_server, tmp_path, monkeypatch
):
    """Two resumes of one run: the other one (`--skip`, in this process) runs to its end right
    after this one chose the run. Once this one holds the run's lock it reads the run again,
    finds it finished, and says so in one line; nothing of the run is written."""
    repo = repo_with(tmp_path / "repo")
    _, run_id, tree = rejected_worktree_run(agent_in_process, fake_server, repo, "theta.txt")
    skipping = fake_server([no_facts()])
    choose = RunStore.target
    other: list[object] = []
    left: list[dict] = []

    def another_resume_ends_it(self, *args, **kwargs):
        chosen = choose(self, *args, **kwargs)
        if not other:
            other.append("started")
            try:  # without --json: none of its lines is taken for this resume's events
                main(["run", "--resume", "--run-id", run_id, "--skip", "--yes",
                      "--base-url", skipping.url])  # fmt: skip
            except SystemExit as e:
                other.append(e.code)
            left.append(snapshot(repo / ".agent" / "runs"))
        return chosen

    monkeypatch.setattr(RunStore, "target", another_resume_ends_it)
    late = fake_server([])
    again = agent_in_process(
        "run", "--resume", "--run-id", run_id, "--yes", "--json", "--base-url", late.url,
        cwd=repo,
    )  # fmt: skip
    assert other == ["started", 3], again.stdout + again.stderr  # skipped: the run is finished
    assert again.returncode == 1, again.stdout + again.stderr
    message = (
        f"run {run_id} is finished (skipped): it ended while this resume was starting, so "
        "there is nothing left to resume; nothing was changed"
    )
    done = events(again.stdout)[-1]
    assert done["event"] == "run_done" and message in done["message"], again.stdout
    assert again.stderr.strip().splitlines()[-1].startswith(f"error: {message}"), again.stderr
    assert late.chat_requests == []
    assert snapshot(repo / ".agent" / "runs") == left[0]  # nothing written since
    assert state(repo, run_id)["status"] == "skipped"
    assert status(tree) == "?? not-theta.txt\n"  # the skipped task's file, left as it was
