"""The harness's judgement of an attempt: the acceptance command's exit code, or a model verdict.

With an acceptance command, it is split with `shlex` and run without a shell in the repo;
the attempt passes if and only if it exits 0 (and, when its output is unittest's or pytest's,
a test passed: before Python 3.12 `python -m unittest` exits 0 when it finds none, and both
exit 0 when every test was skipped or expected to fail; the runner's summary counts no test
that failed; and no more tests are skipped than in the check's run before the task in place of
tests that failed then, Proofs and Task.baseline_counts; ran.py). Without
one but with acceptance criteria, a model judges the diff through the forced tool
`submit_verdict` (`core.models.ModelVerdict`), asked once more when its verdict is invalid; a
second invalid verdict is a fail. With neither, the claim is not trusted: fail.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.structured import Failure, Form, Log, ask
from agent_cli.agent.ask.window import Window
from agent_cli.agent.judge.acceptance import missing
from agent_cli.agent.judge.ran import (
    counted,
    cut_short,
    failures_counted,
    more_skipped,
    no_test_passed,
)
from agent_cli.core import fences
from agent_cli.core.models import TIMED_OUT, ModelVerdict, Tally, Task, Verdict
from agent_cli.core.protocols import ChatModel, CommandOutcome

TAIL_CHARS = 2000
RunArgv = Callable[[list[str]], CommandOutcome]

VERDICT = Form("submit_verdict", "Say whether the task is done.", ModelVerdict, "verdict")
VERDICT_TOOL = VERDICT.tool()


def run_acceptance(
    cmds: list[str],
    run_argv: RunArgv,
    before: Mapping[str, Tally] | None = None,
    counts: dict[str, Tally] | None = None,
) -> Verdict:
    """Run each command (no shell); pass only if every one exits 0 and its output, when a test
    runner's, shows a test that passed (ran.py). `before`: what each command's test runner
    counted before the task (Task.baseline_counts), against which a pass must not have more
    tests skipped in place of those that failed; `counts` is given what each run counted."""
    for cmd in cmds:
        try:
            argv = shlex.split(cmd)
        except ValueError as e:
            return Verdict(passed=False, reason=f"cannot parse `{cmd}`: {e}", command=cmd)
        if not argv:
            return Verdict(passed=False, reason="the acceptance command is empty", command=cmd)
        if "\0" in cmd:
            return Verdict(passed=False, reason=f"`{cmd}` holds a NUL character", command=cmd)
        res = run_argv(argv)
        tail = res.output[-TAIL_CHARS:]
        if res.timed_out:
            return Verdict(
                passed=False,
                command=cmd,
                exit_code=None,
                output_tail=tail,
                reason=f"`{cmd}` {TIMED_OUT} {res.timeout_s:g} s\n{tail}",
            )
        now = counted(res.output, argv)
        if now is not None and counts is not None:
            counts[cmd] = now
        if res.exit_code != 0:
            return Verdict(
                passed=False,
                command=cmd,
                exit_code=res.exit_code,
                output_tail=tail,
                reason=f"`{cmd}` exited {res.exit_code}\n{tail}",
            )
        idle = (
            failures_counted(res.output, argv)
            or no_test_passed(res.output, argv)
            or cut_short(argv, res.output)
        )
        then = (before or {}).get(cmd)
        if not idle and then is not None and now is not None:
            idle = more_skipped(then, now)
        if idle:
            return Verdict(
                passed=False,
                command=cmd,
                exit_code=0,
                output_tail=tail,
                reason=f"`{cmd}` exited 0 but {idle}\n{tail}",
            )
    last = cmds[-1]
    return Verdict(passed=True, command=last, exit_code=0, reason=f"`{last}` exited 0")


def judge_with_model(
    model: ChatModel,
    task: Task,
    evidence: str,
    goal: str,
    criteria: str = "",
    log: Log | None = None,
    window: Window | None = None,
) -> Verdict:
    """A model's verdict on the evidence; anything but a valid `pass` is a fail. The request
    is fitted to `window` (the smallest of the roles') and to the model's own: a diff that
    does not fit is cut from its end, and says so."""
    messages = Request(
        system=prompts.load("verifier"),
        goal=goal,
        task=f"Task: {task.goal}\nAcceptance criteria: {task.acceptance}\n"
        f"Success criteria of the whole plan: {criteria.strip() or '-'}",
        context=f"Changes:\n{fences.tool_output('git_diff', evidence)}",
        goal_header="GOAL of the whole run (unchanged):",
    ).fitted([VERDICT_TOOL], window)
    got = ask(model, messages, VERDICT, log=log, window=window)
    if isinstance(got, Failure):  # why is in the trajectory, with the replies
        return Verdict(passed=False, judge="model", reason="the verifier's verdict was unparseable")
    said = got.value
    return Verdict(
        passed=said.verdict == "pass",
        judge="model",
        reason=f"model verifier: {said.verdict}: {said.reason}",
    )


def verify(
    task: Task,
    accept_cmds: list[str],
    run_argv: RunArgv,
    model: ChatModel | None,
    evidence: Callable[[], str],
    goal: str,
    refusal: Callable[[str], str | None] | None = None,
    criteria: str = "",
    log: Log | None = None,
    root: Path | None = None,
    window: Window | None = None,
) -> Verdict:
    """Judge one attempt at `task`; a model's verdict is asked within `window`.

    The task's own command is checked against the command policy again before it runs; a
    refused one, or one whose program does not exist (exit 127, and the program is on neither
    PATH nor in the repository `root`), hands the judgement to the user's --accept commands
    when there are any. A program that exists and exits 127 failed: code under test can exit
    127 to pass its check off to a weaker --accept.
    """
    cmd = task.acceptance_cmd
    if cmd:
        reason = refusal(cmd) if refusal else None
        verdict = (
            Verdict(passed=False, command=cmd, reason=f"`{cmd}` was not run: {reason}")
            if reason
            else run_acceptance([cmd], run_argv, task.baseline_counts)
        )
        vanished = verdict.exit_code == 127 and (root is None or missing(cmd, root))
        if accept_cmds and (reason or vanished):
            user = run_acceptance(accept_cmds, run_argv, task.baseline_counts)
            why = reason or "its program does not exist (exit 127)"
            user.reason = (
                f"`{cmd}` could not judge the task ({why}); your --accept did: {user.reason}"
            )
            user.by_accept = True
            return user
        return verdict
    if accept_cmds:
        return run_acceptance(list(accept_cmds), run_argv, task.baseline_counts)
    if task.acceptance.strip() and model is not None:
        return judge_with_model(model, task, evidence(), goal, criteria, log, window)
    return Verdict(
        passed=False,
        judge="none",
        reason="no acceptance command and no criteria to judge by: "
        "the model's claim is not trusted",
    )


def judging_commands(task: Task, accept_cmds: list[str]) -> list[str]:
    """The commands that judge `task`: its own, else the user's."""
    return [task.acceptance_cmd] if task.acceptance_cmd else list(accept_cmds)


def judged_by(task: Task, accept_cmds: list[str], verdict: Verdict) -> list[str]:
    """The commands whose run `verdict` is: the user's when the task's own command handed
    the judgement to them (`verify`), else judging_commands()."""
    return list(accept_cmds) if verdict.by_accept else judging_commands(task, accept_cmds)


class Proofs:
    """Whether a task's check failed before the task (red-green) or already passed, and what
    its test runner counted then (`tallies`: passed, failed, skipped; ran.py).

    Results are cached per (commands, tree): the tree a verified task leaves is the tree the
    next task starts from, so with one command for every task the check runs once per task.
    """

    def __init__(self, limit: int = 256) -> None:
        self.seen: dict[tuple[tuple[str, ...], str], bool] = {}
        self.counts: dict[tuple[tuple[str, ...], str], dict[str, Tally]] = {}
        self.limit = limit

    def remember(
        self,
        cmds: list[str],
        tree: str | None,
        passed: bool,
        counts: Mapping[str, Tally] | None = None,
    ) -> None:
        """Record what `cmds` gave on `tree` (and what their test runners counted)."""
        if tree and cmds:
            if len(self.seen) >= self.limit:
                self.counts.pop(oldest := next(iter(self.seen)), None)
                self.seen.pop(oldest)
            key = (tuple(cmds), tree)
            self.seen[key] = passed
            if counts:
                self.counts[key] = dict(counts)
            else:
                self.counts.pop(key, None)

    def baseline(
        self,
        cmds: list[str],
        tree: str | None,
        run_argv: RunArgv,
        refusal: Callable[[str], str | None] | None = None,
    ) -> Literal["pass", "fail"] | None:
        """ "pass" or "fail": `cmds` on the task's starting state; None when it cannot be run."""
        if not cmds or not tree or (refusal and any(refusal(c) for c in cmds)):
            return None
        key = (tuple(cmds), tree)
        if key not in self.seen:
            counts: dict[str, Tally] = {}
            verdict = run_acceptance(cmds, run_argv, counts=counts)
            if verdict.exit_code == 127:
                return None
            self.remember(cmds, tree, verdict.passed, counts)
        return "pass" if self.seen[key] else "fail"

    def tallies(self, cmds: list[str], tree: str | None) -> dict[str, Tally]:
        """What each of `cmds` counted on `tree` when baseline() ran it ({} when it was not run
        there, or its output held no test runner's summary)."""
        return dict(self.counts.get((tuple(cmds), tree or ""), {}))


def proof(baseline: str | None) -> Literal["red-green", "regression-only"] | None:
    """The kind of evidence a verified task has, from its check before the task."""
    if baseline == "fail":
        return "red-green"
    return "regression-only" if baseline == "pass" else None
