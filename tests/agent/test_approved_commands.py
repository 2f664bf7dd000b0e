"""Which acceptance commands the model may run unasked: the ones the human approved (the
approved plan's, --accept), in every session of a run, never a revision's own."""

from __future__ import annotations

import io
from pathlib import Path

from agent_cli.agent.adapt.escalate import Answer
from agent_cli.agent.adapt.replan import approved_commands
from agent_cli.agent.attempt.runtime import Limits
from agent_cli.agent.run.session import RunConfig, Services, Session
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunStore
from agent_cli.cli.config.settings import load_settings
from agent_cli.cli.wiring import RunKit, RunOptions, build_model, open_workspace
from agent_cli.core.models import Task
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.ui.console import make_console
from embedkit import HashEmbedder
from reliability.relkit import call, finish, plan, repo_with, task

APPROVED = "test -f done.txt"
REVISED = "test -f notes.txt"


class Allowing:
    """The run's kit, keeping the commands the session lets the model run unasked."""

    def __init__(self, kit: RunKit) -> None:
        self.kit = kit
        self.allowed: list[str] = []

    def allow_command(self, cmd: str) -> None:
        self.allowed.append(cmd)
        self.kit.allow_command(cmd)

    def __getattr__(self, name: str):
        return getattr(self.kit, name)


def session(repo: Path, url: str, goal: str | None, answer: Answer | None = None):
    """One session of `agent run GOAL` (or `--resume` with `answer`); its exit code and the
    commands it allowed."""
    settings = load_settings(
        repo, {"base_url": url, "max_retries": 0}, env={}, user_rc=repo.parent / "no-agentrc"
    )
    console = make_console("json", out=io.StringIO(), err=io.StringIO())
    state_dir = settings.state_dir(repo)
    workspace, policy = open_workspace(settings, repo, state_dir, console)
    embedder = HashEmbedder()
    with workspace, LazyLongTermMemory(state_dir / "chroma", embedder) as longterm:
        workspace.git.exclude_state(state_dir)
        parts = Allowing(RunKit(settings, workspace, state_dir, policy, embedder, longterm))
        model = build_model(settings, RunOptions(goal=goal, repo=repo), console)
        run = Session(
            Services(workspace, model, console, longterm, parts, RunStore(state_dir)),  # type: ignore[arg-type]
            RunConfig(limits=Limits(200, 30, 5.0, 3000)),
        )
        try:
            code = run.start(goal) if goal else run.resume(None, answer)
        finally:
            parts.kit.close()
    console.close()
    return code, parts.allowed


def test_a_resumed_run_allows_the_approved_plans_commands_and_never_a_revisions(
    fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    rejected = [finish("no"), finish("still no")]
    code, allowed = session(repo, fake_server([plan(task())] + rejected).url, "Create done.txt")
    assert code == 3 and allowed == [APPROVED]
    notes = task("Write notes.txt", REVISED)
    revise = call("revise_plan", keep=False, reason="notes instead", tasks=[notes])
    code, allowed = session(
        repo, fake_server([revise] + rejected).url, None, Answer("replan", "notes instead")
    )
    assert code == 3 and allowed == [APPROVED]
    # a later session of the same run: the revision's command is still not the human's
    code, allowed = session(repo, fake_server(rejected).url, None)
    assert code == 3 and allowed == [APPROVED]


def test_the_approved_commands_are_the_plan_before_every_revision():
    state = AgentState(goal="g", plan=[Task(goal="a", acceptance_cmd="A"), Task(goal="n")])
    state.revisions = [
        {"start": 1, "old": [{"goal": "b", "acceptance_cmd": "B"}], "new": []},
        {"start": 1, "old": [{"goal": "c", "acceptance_cmd": "C"}], "new": []},
    ]
    assert approved_commands(state) == ["A", "B"]
    state.revisions = []  # never revised: the plan is the approved one
    assert approved_commands(state) == ["A"]
    state.revisions = [{"start": 5, "old": []}]  # unreadable: nothing is known approved
    assert approved_commands(state) == []
