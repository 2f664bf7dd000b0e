"""What a run leaves in long-term memory: one episode, and a fact per passing acceptance command."""

from __future__ import annotations

from agent_cli.agent.runstore import RunRecord
from agent_cli.agent.state import AgentState
from agent_cli.models import CommandRun, Episode, TaskRecord


def build_episode(run: RunRecord, state: AgentState, commands: list[tuple[str, int | None]],
                  files: list[str], signatures: list[str]) -> Episode:
    """The episode of a run from its saved record and the AgentState."""
    tasks = [TaskRecord(goal=t.goal, status=t.status, attempts=t.attempts,
                        acceptance_cmd=t.acceptance_cmd, exit_code=t.exit_code)
             for t in state.plan]
    done = sum(t.status == "verified" for t in state.plan)
    summary = f"{done} of {len(tasks)} task(s) verified."
    rejected = [t for t in state.plan if t.status == "rejected"]
    if rejected:
        summary += f" Rejected: {rejected[0].goal}. Why: {rejected[0].last_reason[:300]}"
    return Episode(
        run_id=run.run_id, goal=state.goal, plan=[t.goal for t in state.plan], tasks=tasks,
        status=run.status, files_touched=sorted(set(files)),
        commands=[CommandRun(cmd=c, exit_code=e) for c, e in commands[-50:]],
        failure_signatures=sorted(set(signatures))[:20], summary=summary,
        prompt_tokens=run.usage.prompt_tokens, completion_tokens=run.usage.completion_tokens,
        cost_usd=run.usage.cost_usd, started_at=run.started_at, ended_at=run.updated_at)


def verified_facts(state: AgentState, repo_name: str, run_id: str,
                   accept_cmds: list[str]) -> list[tuple[str, str]]:
    """(text, source) for each acceptance command the harness saw exit 0."""
    facts = []
    for t in state.plan:
        cmd = t.acceptance_cmd or "; ".join(accept_cmds)
        if t.status == "verified" and cmd and t.exit_code == 0:
            facts.append((f"In {repo_name}, `{cmd}` exits 0 once this is done: {t.goal}",
                          f"harness, run {run_id}"))
    return facts
