"""The one gate every task passes on its way into a plan, whatever the route.

A task enters a plan four ways: the first plan (`submit_plan`), the model's revision between
tasks (`revise_plan`), the human's re-plan (`r` on a terminal, `--resume --replan`) and a
resumed run's saved plan. Each goes through `Gate.problems`, so each refuses the same
acceptance commands (`acceptance.problem`: a program that does not exist, a command the
policy refuses, a command that cannot fail), and the same tasks nothing would judge: with
neither a command nor criteria, and no `--accept` command to judge them instead (the verifier
would fail them whatever they did). The user's own `--accept` commands, which the final gate
runs, are judged the same way before the run asks the model anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agent_cli.agent.judge import acceptance
from agent_cli.core.models import SETTLED, Task

if TYPE_CHECKING:
    from agent_cli.core.protocols import Workspace


UNJUDGED = (
    "it has neither an acceptance_cmd nor acceptance criteria, and no --accept command judges "
    "tasks without one, so nothing would judge it and it could never pass: give it an "
    "acceptance_cmd that fails until its work is done, or acceptance criteria a reviewer can "
    "judge its changes by"
)


class Gate:
    """Judges the tasks entering a plan in one workspace: their acceptance commands, and
    whether anything would judge those without one (the user's `accept_cmds`, else their
    criteria)."""

    def __init__(self, workspace: Workspace, accept_cmds: Sequence[str] = ()) -> None:
        self.workspace = workspace
        self.accept_cmds = list(accept_cmds)

    def problems(self, tasks: Sequence[Task]) -> dict[int, str]:
        """The problem of each task (its acceptance command, or nothing to judge it), by
        index in `tasks`."""
        ws = self.workspace
        found = acceptance.plan_problems([t.acceptance_cmd for t in tasks], ws.root, ws.refusal)
        if not self.accept_cmds:
            for index, task in enumerate(tasks):
                if not task.acceptance_cmd and not task.acceptance.strip():
                    found[index] = UNJUDGED
        return dict(sorted(found.items()))

    def refused(self, tasks: Sequence[Task], first: int = 0) -> str | None:
        """Why the tasks cannot enter the plan (numbered from task `first` + 1), or None."""
        found = self.problems(tasks)
        return "; ".join(f"task {first + i + 1}: {why}" for i, why in sorted(found.items())) or None

    def users_commands(self, commands: Sequence[str]) -> str | None:
        """Why one of the user's own acceptance commands could never pass, or None."""
        ws = self.workspace
        for cmd in commands:
            why = acceptance.problem(cmd, ws.root, ws.refusal)
            if why:
                return why
        return None

    def open_tasks(self, plan: Sequence[Task]) -> str | None:
        """Why a saved plan's unsettled tasks cannot be carried out as saved, or None."""
        found = self.problems([t for t in plan if t.status not in SETTLED])
        if not found:
            return None
        numbers = [i for i, t in enumerate(plan) if t.status not in SETTLED]
        return "; ".join(f"task {numbers[i] + 1}: {why}" for i, why in sorted(found.items()))
