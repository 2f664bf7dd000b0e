"""Dispatch and verify: two attempts per task (one more per human hint), judged by the harness.

A retry starts a fresh conversation; the first attempt's changes stay on disk and its
failure (exit code and output tail) reaches the model through `AgentState.last_error`
and working memory. A verified task that changed files becomes one commit (never of files a
skipped task left, nor of the files a task a revision replaced left, until a later task changes
them: those stay uncommitted for the human); when its attempts are used up the task is
rejected and its changes stay uncommitted for the human. A task whose check passed
before it started and that changed no file is not verified: it had nothing to do. A check
that passes only with code the commit cannot hold (ignored, or a repository of its own)
fails the attempt (hidden.py). When a task's own command could not judge it (refused, or its
program gone) and the user's --accept did, what follows from the verdict is theirs: they are
run again without that code, and the files they read (and the gone command's) are the check's
own files a task changed (touched.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from agent_cli.agent.attempt import hooked
from agent_cli.agent.attempt.executor import AttemptOutcome, run_attempt
from agent_cli.agent.attempt.freshness import BlobOf
from agent_cli.agent.attempt.runtime import Runtime
from agent_cli.agent.judge import hidden, touched
from agent_cli.agent.judge.verifier import (
    Proofs,
    judged_by,
    judging_commands,
    proof,
    run_acceptance,
    verify,
)
from agent_cli.core import events, fences
from agent_cli.core.models import Task, Verdict
from agent_cli.core.protocols import ChatModel, Workspace
from agent_cli.core.text import readable, shorten

if TYPE_CHECKING:
    from agent_cli.agent.run.state import AgentState


def commit_message(task: Task, run_id: str) -> str:
    """The task's goal as subject (and body when long), with the run id as a trailer."""
    subject = " ".join(task.goal.split())
    body = ""
    if len(subject) > 72:
        body, subject = subject + "\n\n", shorten(subject, 72)
    return f"{subject}\n\n{body}Agent-Run: {run_id}\n"


def _judge(
    rt: Runtime,
    ws: Workspace,
    index: int,
    accept_cmds: list[str],
    outcome: AttemptOutcome,
    verifier_model: ChatModel | None,
) -> Verdict:
    task = rt.state.plan[index]
    if not outcome.finished:
        return Verdict(passed=False, judge="none", reason=outcome.reason)
    return verify(
        task,
        accept_cmds,
        ws.run_argv,
        verifier_model,
        ws.diff,
        rt.state.goal,
        refusal=ws.refusal,
        criteria=rt.state.success_criteria,
        log=rt.log,
        root=ws.root,
        window=rt.limits.window(),
    )


def held_files(state: AgentState, blob_of: BlobOf) -> set[str]:
    """The files no later commit takes: those skipped tasks left uncommitted, and those the
    tasks a revision replaced left, as long as they are what was left (a later task that
    changes one continues that work: its commit, verified with the file, holds it). Named
    as the run's record keeps them, `readable` (state.json is UTF-8 text)."""
    skipped = {path for t in state.plan if t.status == "skipped" for path in t.left_files}
    left = {path for path, blob in state.dropped.items() if (blob_of(path) or "") == blob}
    return {readable(path) for path in skipped | left}


def unheld(rt: Runtime, ws: Workspace) -> list[str]:
    """The work tree's changed files that a commit may take (not `held_files`), as git
    names them."""
    held = held_files(rt.state, rt.toolbox.blob_of)
    return [f for f in ws.changed_files() if readable(f) not in held]


def _passed(
    rt: Runtime,
    ws: Workspace,
    index: int,
    verdict: Verdict,
    run_id: str,
    proofs: Proofs | None = None,
    cmds: Sequence[str] = (),
) -> None:
    task = rt.state.plan[index]
    if verdict.judge == "command" and proofs is not None:
        task.proof = proof(task.baseline)
        if verdict.command == (cmds[-1] if cmds else None):
            proofs.remember(list(cmds), ws.tree(), True)  # the next task starts from this tree
    files = unheld(rt, ws)
    if verdict.judge == "command" and verdict.command:
        named = list(cmds) or [verdict.command]
        if verdict.by_accept and task.acceptance_cmd:  # the task's own, gone, is named too
            named.append(task.acceptance_cmd)
        task.check_changed = touched.check_files(named, files, ws.root)
    rt.state.committing = index  # the commit that follows is the harness's (a resume's proof)
    rt.save()  # a full disk or read-only state stops the run here, before anything is committed
    try:
        task.commit = ws.commit(files, commit_message(task, run_id)) if files else None
    finally:
        rt.state.committing = None
    task.status = "verified"
    rt.state.last_error = None
    check = f"`{verdict.command}` exited 0" if verdict.command else verdict.reason[:200]
    rt.state.facts.append(f"task {index + 1} verified ({check}): {task.goal}")


def _nothing_to_do(rt: Runtime, ws: Workspace, task: Task, verdict: Verdict) -> bool:
    """Whether a passing task proves nothing: its check passed before it and it changed no file."""
    if verdict.judge != "command" or task.baseline != "pass":
        return False
    return not unheld(rt, ws)


def _failed(rt: Runtime, index: int, attempt: int, verdict: Verdict) -> None:
    rt.state.last_error = (
        f"Attempt {attempt} at task {index + 1} did not pass the harness's check: {verdict.reason}"
    )
    rt.memory.add(
        "test_result",
        fences.tool_output("acceptance", verdict.reason),
        summary=f"task {index + 1} attempt {attempt} failed its acceptance check",
    )


def dispatch_and_verify(
    rt: Runtime,
    ws: Workspace,
    index: int,
    accept_cmds: list[str],
    run_id: str,
    verifier_model: ChatModel | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
    proofs: Proofs | None = None,
) -> bool:
    """Run task `index` until verified or out of attempts; True when settled: verified, or
    nothing to do (its check passed before it started and it changed no file)."""
    task = rt.state.plan[index]
    cmds = judging_commands(task, accept_cmds)
    if proofs is not None and task.attempts == 0 and task.baseline is None:
        tree = ws.tree()
        task.baseline = proofs.baseline(cmds, tree, ws.run_argv, ws.refusal)
        task.baseline_counts = proofs.tallies(cmds, tree) if task.baseline else {}
    before = hidden.snapshot(ws)  # what no commit holds before this task's attempts
    while task.attempts < task.max_attempts:
        task.attempts += 1
        task.status = "running"
        rt.save()
        rt.emit(events.TaskStarted(index=index, goal=task.goal, attempt=task.attempts))
        outcome = run_attempt(rt, index, task.attempts)
        task.summary = outcome.summary
        verdict = _judge(rt, ws, index, accept_cmds, outcome, verifier_model)
        judged = judged_by(task, accept_cmds, verdict)  # --accept's when the task's is gone
        if verdict.passed and verdict.judge == "command":  # not on code no commit holds
            again = partial(run_acceptance, judged, ws.run_argv, task.baseline_counts)
            verdict = hidden.recheck(ws, verdict, before, again)
        if verdict.passed and not _nothing_to_do(rt, ws, task, verdict):
            verdict = hooked.task_verified(rt, index, verdict)  # a hook may refuse it
        task.exit_code, task.last_reason = verdict.exit_code, verdict.reason
        rt.emit(
            events.Verified(
                index=index,
                attempt=task.attempts,
                passed=verdict.passed,
                judge=verdict.judge,
                command=verdict.command,
                exit_code=verdict.exit_code,
                reason=verdict.reason[-2000:],
            )
        )
        rt.log({"type": "verify", "index": index, "verdict": verdict.model_dump()})
        if on_verdict:
            on_verdict(verdict)
        if verdict.passed and _nothing_to_do(rt, ws, task, verdict):
            task.status = "nothing_to_do"
            rt.state.last_error = None
            rt.save()
            rt.emit(
                events.TaskDone(
                    index=index,
                    status="nothing_to_do",
                    attempts=task.attempts,
                    summary=task.summary,
                )
            )
            return True
        if verdict.passed:
            _passed(rt, ws, index, verdict, run_id, proofs, judged)
            rt.save()
            stat = ws.diff_stat(task.commit) if task.commit else ""
            rt.emit(
                events.TaskDone(
                    index=index,
                    status="verified",
                    attempts=task.attempts,
                    commit=task.commit,
                    summary=task.summary,
                    proof=task.proof,
                    check_changed=list(task.check_changed),
                    diff_stat=stat,
                )
            )
            return True
        _failed(rt, index, task.attempts, verdict)
        task.status = "failed"  # the attempt is spent: a resume continues with the next one
        rt.save()
    task.status = "rejected"
    rt.save()
    rt.emit(
        events.TaskDone(
            index=index, status="rejected", attempts=task.attempts, summary=task.summary
        )
    )
    return False
