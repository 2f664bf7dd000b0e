"""A whole run: preflight, recall, plan, approve, dispatch each task, final gate, learn, report.

The session gets every heavy object ready-made (model, memories, repository, console)
from the command layer, so it never reads settings nor imports a vendor SDK. The run's
state is saved whole and atomically at a task's boundaries, and each tool call in between
goes to the run's journal (`journal.py`); `resume()` continues the first task that is not
verified without planning again.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent_cli.agent.adapt import replan
from agent_cli.agent.adapt.escalate import (
    Answer,
    Escalation,
    check_answer,
    final_gate_steps,
    replaced_message,
    skipped_message,
)
from agent_cli.agent.ask import closing, planner
from agent_cli.agent.ask.window import narrowed
from agent_cli.agent.attempt import hooked
from agent_cli.agent.attempt.freshness import FileViews, supersede_changed
from agent_cli.agent.attempt.runtime import Limits, Runtime
from agent_cli.agent.attempt.toolbox import Toolbox
from agent_cli.agent.judge import recheck
from agent_cli.agent.judge.dispatch import dispatch_and_verify, held_files
from agent_cli.agent.judge.gate import Gate
from agent_cli.agent.judge.verifier import Proofs, run_acceptance
from agent_cli.agent.learn import digest
from agent_cli.agent.learn import learning as learn
from agent_cli.agent.learn.run_memory import RunMemory
from agent_cli.agent.run import ending, journal, resumed
from agent_cli.agent.run.ending import RunOutcome
from agent_cli.agent.run.journal import JournalEntry, StepRecord
from agent_cli.agent.run.roles import RoleModels, RoleUsage
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import (
    RunRecord,
    RunStartedWith,
    RunStore,
    RunUsage,
    claim_run_id,
    utc_now,
)
from agent_cli.core import events, tokens
from agent_cli.core.errors import (
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_ESCALATED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    AgentError,
    BudgetExhausted,
    UsageError,
)
from agent_cli.core.models import MAX_ATTEMPTS, SETTLED, Plan, Task, Verdict
from agent_cli.core.protocols import ChatModel, Console, Hooks, LongTermStore, Workspace
from agent_cli.core.redact import redact
from agent_cli.memory.longterm.signatures import failure_signatures
from agent_cli.memory.thresholds import OFFLINE, Thresholds
from agent_cli.memory.working.memory import WorkingMemory

# How long after the first request of a session is built (the plan, or a resumed task's)
# long-term memory starts opening in the background: by then the request is out and the
# model is working (a local server in the tests answers at once, a real model takes
# seconds), so chromadb's import does not delay the request.
OPEN_MEMORY_AFTER_S = 0.25

PLANNED_FILES = 300  # the repository's files the planning request lists

# an aside naming `--resume` for a run already begun: said as such to a run not begun yet
_AGAIN = re.compile(r"\(`agent run --resume`[^()]*\)")


@dataclass
class RunConfig:
    """Plain values that shape one run."""

    accept_cmds: list[str] = field(default_factory=list)
    allow_dirty: bool = False
    plan_only: bool = False
    approve: bool = False  # ask the human to approve the plan
    limits: Limits = field(default_factory=lambda: Limits(200, 30, 5.0, 3000))
    secrets: tuple[str, ...] = ()
    memory_ttl_days: float = 90.0  # long-term items unused this long go to the archive (0: never)
    memory_digest_tokens: int = 1500  # the share of a request the memory digest may take
    memory_thresholds: Thresholds = OFFLINE  # how close recalled memory must be (the embedder's)
    memory_own_store: bool = True  # long-term memory is the repository's own (not shared)
    replan: str = "after_task"  # or "off": no re-plan check after a verified task
    max_replans: int = 3  # re-plan checks the harness asks for in one run
    final_summary: bool = True  # ask the model for a closing summary for the human
    ask_human: bool = False  # a terminal to ask on when a task is rejected
    # the user's changed paths when the caller already ran the workspace's preflight (None: not yet)
    preflight: set[str] | None = None
    # the endpoint, models and limits in effect, saved with the run (None: keep what it has)
    started_with: RunStartedWith | None = None
    # the states of the files the run's hooks and servers run as the run holds them, saved with
    # it so that a resume holds them to the same (None: keep what it has)
    held: dict[str, str] | None = None
    # a worktree run: named before it starts, working in `worktree` beside the user's branch
    run_id: str | None = None
    worktree: str = ""
    base_branch: str | None = None  # the user's branch (None: the branch checked out here)


def _settled(state: AgentState) -> tuple[int, ...]:
    """The tasks whose outcome is final: verified, skipped by the human, or nothing to do."""
    return tuple(i for i, t in enumerate(state.plan) if t.status in SETTLED)


class RunParts(Protocol):
    """What a run makes once it knows its directory; the command layer provides it."""

    def open_memory(self, run_dir: Path) -> WorkingMemory:
        """The run's working memory, its cold zone in `run_dir`."""
        ...

    def start_tools(self) -> None:
        """Start what the tools need before the run exists (the MCP servers), so that Ctrl-C
        while they start leaves no branch and nothing half made."""
        ...

    def make_toolbox(self, memory: WorkingMemory) -> Toolbox:
        """The tools of a task's conversation, over the workspace and `memory`."""
        ...

    def allow_command(self, cmd: str) -> None:
        """Let the model run `cmd` without asking (it was approved with the plan)."""
        ...

    def unstoppable(self) -> AbstractContextManager[None]:
        """A block that Ctrl-C (and what stops a run as it does) waits for: taken once the
        block is done, so a second Ctrl-C cannot cut short the save of a stopped run."""
        ...


@dataclass
class Services:
    """The objects a run works with, each built whole by the command layer."""

    workspace: Workspace
    model: ChatModel
    console: Console
    longterm: LongTermStore
    parts: RunParts
    store: RunStore
    hooks: Hooks | None = None  # the user's hooks; None: none configured
    roles: RoleModels | None = None  # each role's model (None: `model` plays every role)


class Session:
    """One run of `agent run`, new or resumed."""

    def __init__(self, services: Services, config: RunConfig) -> None:
        self.sv = services
        self.cfg = config
        self.store = services.store
        # each role through its own view, so usage is told per role even on a shared model
        self.models = (services.roles or RoleModels.one(services.model)).metered()
        self.run: RunRecord | None = None
        self.rt: Runtime | None = None
        self.signatures: list[str] = []
        self._base_usage = RunUsage()  # usage saved by earlier sessions of this run
        self.proofs = Proofs()  # each task's check on its starting state, per command and tree
        # every task passes it on its way into the plan
        self.gate = Gate(services.workspace, config.accept_cmds)
        self.mem = RunMemory(
            services.longterm,
            services.workspace.root,
            config.memory_ttl_days,
            config.limits.window(),
            read_only=config.plan_only,
            digest_tokens=config.memory_digest_tokens,
            thresholds=config.memory_thresholds,
            own_store=config.memory_own_store,
        )
        self.mem.take_identity()  # before any model request, so before any of its commands
        self._answer: Answer | None = None  # the human's answer given with --resume
        self._facts: list[Any] | None = None  # asked for once the tasks are over
        self._notes: list[str] = []  # notes taken since the last journal line
        self._verified: tuple[int, ...] = ()  # the verified tasks of the last durable save
        self._planning: list[dict[str, object]] = []  # planning requests, logged with the run

    # -- starting -----------------------------------------------------------------------
    def start(self, goal: str) -> int:
        """Plan `goal` and carry it out; returns the exit code."""
        ws = self.sv.workspace
        with self._before_run(new=True):
            self._check_accept()
            protected = self.cfg.preflight
            if protected is None:
                protected = ws.preflight(self.cfg.allow_dirty)
            recalled = self._recall(goal)
            plan = self._plan(goal, recalled)
            if plan is not None:
                self.sv.parts.start_tools()
        if plan is None:
            self._done_early("planned", EXIT_OK, "the plan is shown; nothing was changed")
            return EXIT_OK
        run_id = self.cfg.run_id or claim_run_id(self.store.root)
        branch = f"agent/{run_id}"
        base_branch = self.cfg.base_branch
        if base_branch is None:
            base_branch = ws.current_branch() or ""
        try:
            ws.start_branch(branch)
        except BaseException:
            with suppress(OSError):  # the directory claimed for it, still empty
                self.store.run_dir(run_id).rmdir()
            raise
        self.run = RunRecord(
            run_id=run_id,
            goal=goal,
            branch=branch,
            base=ws.head(),
            accept_cmds=self.cfg.accept_cmds,
            protected=sorted(protected),
            started_at=utc_now(),
            success_criteria=plan.success_criteria,
            base_branch=base_branch,
            started_with=self.cfg.started_with or RunStartedWith(),
            worktree=self.cfg.worktree,
            held=self.cfg.held or {},
            instructions_since=self.mem.instructions.since,
        )
        for record in self._planning:
            self.store.log(run_id, record)
        state = AgentState(goal=goal, plan=plan.tasks, success_criteria=plan.success_criteria)
        memory = self.sv.parts.open_memory(self.store.run_dir(run_id))
        memory.set_goal(goal)
        self.sv.console.emit(
            events.RunStarted(
                run_id=run_id, goal=goal, branch=branch, repo=str(ws.root), base=base_branch
            )
        )
        return self._execute(self.run, state, memory, recalled)

    @contextmanager
    def _before_run(self, new: bool = False) -> Iterator[None]:
        """Until the run exists, an error or Ctrl-C still ends the event stream with run_done.
        A `new` run has nothing saved yet: a way on through `--resume` is said as running the
        same command again."""
        try:
            yield
        except AgentError as e:
            if new:
                e.hint = _AGAIN.sub("(run the same command again)", e.hint).replace(
                    "`agent run --resume`", "run the same command again"
                )
            self._done_early("failed", e.exit_code, e.one_line())
            raise
        except KeyboardInterrupt:
            self._done_early("interrupted", EXIT_INTERRUPTED, "interrupted before the run started")
            raise

    def _done_early(self, status: str, code: int, message: str) -> None:
        usage = self.models.usage()
        done = events.RunDone(
            run_id="",
            status=status,
            exit_code=code,
            tasks=[],
            steps=0,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
            message=message,
            usage_by_role=_by_role(self.models.by_role()),
        )
        hooked.run_end(self.sv.hooks, self.sv.console.emit, done)
        self.sv.console.emit(done)

    def _recall(self, goal: str) -> str:
        found = self.mem.recall(goal)
        results = found.items
        if results:
            kinds = sorted({r.kind for r in results})
            self.sv.console.emit(
                events.Notice(
                    text=f"recalled {len(results)} item{'s' if len(results) != 1 else ''} from "
                    f"earlier runs ({', '.join(kinds)}); `agent recall` shows them"
                )
            )
        return digest.render(found, self.mem.digest_tokens)

    def _plan(self, goal: str, recalled: str) -> Plan | None:
        files = self.sv.workspace.list_files()
        # A command can name a file or directory after the key; every list the model sees is redacted.
        shown = files[:PLANNED_FILES]
        if len(files) > len(shown):  # a cut said as a cut: the planner is not told this is all
            shown.append(
                f"[... {len(files) - len(shown):,} more files not listed here, of {len(files):,}; "
                "each task's tools (list_dir, search) see them all]"
            )
        listing = redact("\n".join(shown), self.cfg.secrets)
        messages = planner.plan_messages(
            goal,
            recalled,
            listing,
            self.cfg.accept_cmds,
            self.mem.instructions.render(),
            self.cfg.limits.window(),
        )
        self.sv.console.emit(events.Planning(goal=goal))
        # The store itself opens while the model plans, for the run's writes (the recall
        # above may have read its snapshot instead), once the plan request is out; so does
        # the tokenizer working memory counts with, which the first tool call would wait for.
        self.sv.longterm.open_in_background(after_s=OPEN_MEMORY_AFTER_S)
        if not self.cfg.plan_only:
            tokens.load_in_background(after_s=OPEN_MEMORY_AFTER_S)
        plan, _ = planner.make_plan(
            self.models.planner,
            messages,
            self._check_plan,
            fallback=bool(self.cfg.accept_cmds),
            log=self._planning.append,
        )
        event = events.PlanMade(
            goal=plan.goal or goal,
            tasks=events.planned(plan.tasks),
            success_criteria=plan.success_criteria,
            accept_cmds=self.cfg.accept_cmds,
        )
        self.sv.console.emit(event)
        if self.cfg.plan_only:
            return None
        if self.cfg.approve and not self.sv.console.approve_plan(event):
            raise AgentError(
                "the plan was not approved; nothing was changed",
                "run again with a more precise goal",
            )
        self._allow_acceptance([t.acceptance_cmd for t in plan.tasks if t.acceptance_cmd])
        return plan

    def _check_accept(self) -> None:
        """Refuse an --accept command the final gate could never pass, before any request."""
        why = self.gate.users_commands(self.cfg.accept_cmds)
        if why:
            raise UsageError(
                f"--accept: {why}; nothing was started",
                "give a command that exits 0 only when the goal is met (python -m pytest -q, say)",
            )

    def _check_plan(self, plan: Plan) -> dict[int, str]:
        """The tasks whose acceptance command cannot run, is refused, or cannot fail."""
        return self.gate.problems(plan.tasks)

    def _allow_acceptance(self, cmds: list[str]) -> None:
        """`cmds` and --accept's were approved by the human (with the plan, or given): the
        model may run them unasked. A revision's new commands are not among them."""
        for cmd in cmds + self.cfg.accept_cmds:
            self.sv.parts.allow_command(cmd)

    # -- resuming -----------------------------------------------------------------------
    def resume(self, run_id: str | None, answer: Answer | None = None) -> int:
        """Continue a saved run at its first task that is not verified (with the human's answer).

        `--accept` given now replaces the commands the run was started with (the final check
        and the fallback judge), checked as a new run's are; without it the saved ones hold."""
        with self._before_run():
            self._check_accept()
            run = self.store.load(self.store.target(run_id))
            state = resumed.saved_state(run)
            check_answer(state, answer, run.run_id)
            # the --accept commands that hold from now on judge the tasks without a command
            self.gate = Gate(self.sv.workspace, self.cfg.accept_cmds or run.accept_cmds)
            refused = self.gate.open_tasks(state.plan)
            if refused:
                raise AgentError(
                    f"run {run.run_id} cannot be resumed: its saved plan has a check the "
                    f"harness cannot use ({refused})",
                    "start a new run for the remaining work",
                )
        self.run = run
        self.mem.instructions_since(
            run.instructions_since,
            lambda path: self.sv.workspace.blob_at(run.base, path) if run.base else None,
        )
        if self.cfg.worktree:  # where its tree is now (a checkout moved takes it along)
            run.worktree = self.cfg.worktree
        if self.cfg.started_with is not None:  # new flags given now hold for the next resume too
            run.started_with = self.cfg.started_with
        if self.cfg.held is not None:  # what was held first stays held (a path new now joins)
            run.held = {**self.cfg.held, **run.held}
        self.sv.longterm.open_in_background(after_s=OPEN_MEMORY_AFTER_S)  # for the run's writes
        tokens.load_in_background(after_s=OPEN_MEMORY_AFTER_S)
        self.mem.learned = learn.Learned.from_dict(run.learned)
        with self._before_run():
            resumed.check_not_rewound(state, run, self.sv.workspace)
            resumed.check_memory(run)
            entries = journal.parse(self.store.journal_lines(run.run_id))
            left = journal.last_tree(entries, state, run.left_tree)
            users = resumed.users_changes(run, left, self.sv.workspace)
            if users and not self.cfg.allow_dirty:
                raise resumed.refusal(run, users)
            run.protected = sorted({*run.protected, *users})
            self.sv.workspace.resume_on(run.branch, run.protected)
            resumed.check_verified(state, run, self.sv.workspace)
        adopted = resumed.adopt_unsaved_commit(state, run, self.sv.workspace)
        state.success_criteria = state.success_criteria or run.success_criteria
        for task in state.plan:
            if task.status == "running":
                task.status, task.attempts = "pending", max(task.attempts - 1, 0)
            elif task.status == "rejected" and answer is None:
                task.earlier_attempts += task.attempts
                task.status, task.attempts, task.max_attempts = "pending", 0, MAX_ATTEMPTS
        self._answer = answer
        memory = self.sv.parts.open_memory(self.store.run_dir(run.run_id))
        memory.import_state(run.memory)
        views = FileViews.from_dict(run.views)
        self._replay(run, state, memory, views)
        self.sv.console.emit(
            events.RunStarted(
                run_id=run.run_id,
                goal=state.goal,
                resumed=True,
                branch=run.branch,
                base=self._base_branch(),
                repo=str(self.sv.workspace.root),
            )
        )
        self.sv.console.emit(
            events.PlanMade(
                goal=state.goal,
                tasks=events.planned(state.plan),
                success_criteria=state.success_criteria,
                accept_cmds=self.cfg.accept_cmds or run.accept_cmds,
            )
        )
        if adopted is not None:
            commit = (state.plan[adopted].commit or "")[:10]
            self.sv.console.emit(
                events.Notice(
                    text=f"task {adopted + 1} was committed ({commit}) just before the run "
                    "stopped: verified by that commit, not done again"
                )
            )
        if self.cfg.accept_cmds:
            run.accept_cmds = list(self.cfg.accept_cmds)  # saved with the run from now on
        self.cfg.accept_cmds = run.accept_cmds
        self._allow_acceptance(replan.approved_commands(state))  # never a revision's own
        return self._execute(run, state, memory, self._recall(state.goal), views)

    # -- the loop -----------------------------------------------------------------------
    def _execute(
        self,
        run: RunRecord,
        state: AgentState,
        memory: WorkingMemory,
        recalled: str,
        views: FileViews | None = None,
    ) -> int:
        self._base_usage = run.usage.model_copy()
        toolbox = self.sv.parts.make_toolbox(memory)
        toolbox.on_note = lambda item_id, text: self._noted(state, item_id, text)
        toolbox.recall_longterm = self.mem.recall_for_model
        self._verified = _settled(state)
        self.rt = rt = Runtime(
            model=self.models.executor,
            toolbox=toolbox,
            memory=memory,
            state=state,
            limits=self.cfg.limits,
            emit=self._emit,
            log=lambda rec: self.store.log(run.run_id, rec),
            save=self.save,
            journal=self._stepped,
            recalled=recalled,
            instructions=self.mem.instructions,
            spent_before=run.usage.cost_usd,
            hooks=self.sv.hooks,
            run_id=run.run_id,
            models=self.models,
            views=views or FileViews(),
            workspace=self.sv.workspace,
        )
        supersede_changed(rt.views, memory, toolbox.blob_of)  # changed before the run was resumed
        code, message = EXIT_ERROR, ""
        try:
            outcome = self._tasks(run, rt, self.sv.workspace)
            code, message = outcome.code, outcome.message
            try:  # the model's facts about the repository first, then its summary for the human
                self._facts = self.mem.facts(rt, run.status)
                if self.cfg.final_summary:
                    closing.summarise(rt, f"{run.status}: {message}")
            except KeyboardInterrupt:  # the work is settled: Ctrl-C skips only these asks
                self._emit(
                    events.Notice(
                        text="interrupted after the tasks: the facts and the closing summary "
                        f"were not asked for; the run's outcome stands ({run.status})"
                    )
                )
        except BudgetExhausted as e:
            run.status, code, message = "budget_exhausted", EXIT_BUDGET, e.one_line()
            self._emit(events.BudgetExhausted(budget=e.budget, used=e.used, limit=e.limit))
        except KeyboardInterrupt:
            run.status, code = "interrupted", EXIT_INTERRUPTED
            message = "interrupted; the state is saved: continue with `agent run --resume`"
        except AgentError as e:
            run.status, code, message = "failed", e.exit_code, e.one_line()
        except Exception as e:  # a bug must not lose the run: save, log, report in one line
            self.store.log(run.run_id, {"type": "crash", "traceback": traceback.format_exc()})
            run.status, code = "failed", EXIT_ERROR
            message = f"internal error: {type(e).__name__}: {e} (trajectory has the traceback)"
        finally:
            try:
                with self.sv.parts.unstoppable():  # the state is on disk before a second Ctrl-C
                    self.save()
                self._learn()
            except KeyboardInterrupt:  # the outcome is settled: Ctrl-C skips what is left to learn
                self._emit(
                    events.Notice(
                        text="interrupted as the run ended: what was left of writing long-term "
                        f"memory was skipped; the run's outcome stands ({run.status})"
                    )
                )
            self._done(code, ending.with_way_on(run, code, message))
        return code

    def _tasks(self, run: RunRecord, rt: Runtime, ws: Workspace) -> RunOutcome:
        ask = self.sv.console.ask_escalation if self.cfg.ask_human else None
        escalation = Escalation(rt, ws, self.gate, ask, run.branch, self._answer)
        index = 0
        while True:
            if index == len(rt.state.plan):  # every task settled: do the earlier checks hold?
                regressed = self._recheck(run, rt, ws)  # it may add tasks to restore one
                if regressed is not None:
                    return regressed
                if index == len(rt.state.plan):
                    break
            task = rt.state.plan[index]
            if task.status in SETTLED:
                index += 1
                continue
            if task.status != "rejected" and dispatch_and_verify(
                rt,
                ws,
                index,
                self.cfg.accept_cmds,
                run.run_id,
                verifier_model=self.models.verifier,
                on_verdict=self._on_verdict,
                proofs=self.proofs,
            ):
                self._replan_after(rt, index)
                index += 1
                continue
            outcome = escalation.resolve(index)
            if outcome == "stop":
                run.status = "escalated"
                return RunOutcome(EXIT_ESCALATED, f"task {index + 1} needs you")
            index += outcome == "next"
        return self._final_gate(run, rt, ws)

    def _recheck(self, run: RunRecord, rt: Runtime, ws: Workspace) -> RunOutcome | None:
        """Run the earlier tasks' checks again (recheck.py): None when they hold or when
        tasks were added to restore some; the escalation when one cannot be restored."""
        found = recheck.regressions(rt.state.plan, ws, self.proofs, self.cfg.accept_cmds)
        if not found:
            return None
        plan = rt.state.plan
        again = [f for f in found if recheck.restored_before(plan, f.command)]
        if again or self.cfg.replan == "off":
            return self._regressed(run, (again or found)[0], plan)
        tasks = [recheck.restoring_task(plan, f) for f in found]
        reason = "; ".join(recheck.describe(plan, f) for f in found)
        replan.replace(rt, len(plan), tasks, reason, "recheck")
        rt.state.last_error = "\n".join(f.verdict.reason for f in found)  # the goal says whose
        rt.save()
        return None

    def _regressed(self, run: RunRecord, found: recheck.Regression, plan: list[Task]) -> RunOutcome:
        """Escalate as at a failed final gate: an earlier check fails on the final tree."""
        run.status = "escalated"
        self._emit(
            events.Escalated(
                index=-1,
                goal=recheck.describe(plan, found),
                summary="",
                reason=found.verdict.reason,
                next_steps=final_gate_steps(run.branch),
            )
        )
        return RunOutcome(EXIT_ESCALATED, f"task {found.index + 1}'s check fails at the end")

    def _replan_after(self, rt: Runtime, index: int) -> None:
        """Ask whether the remaining tasks still make sense (within `max_replans`); never
        about the tasks the harness added to restore an earlier check."""
        if (
            self.cfg.replan == "after_task"
            and index + 1 < len(rt.state.plan)
            and rt.state.plan[index + 1].restores is None
            and rt.state.replans < self.cfg.max_replans
        ):
            replan.revise(rt, self.gate, index + 1)

    def _final_gate(self, run: RunRecord, rt: Runtime, ws: Workspace) -> RunOutcome:
        if self.cfg.accept_cmds:
            verdict = run_acceptance(self.cfg.accept_cmds, ws.run_argv)
            self._on_verdict(verdict)
            self._emit(
                events.Verified(
                    index=-1,
                    attempt=1,
                    passed=verdict.passed,
                    judge="command",
                    command=verdict.command,
                    exit_code=verdict.exit_code,
                    reason=verdict.reason[-2000:],
                )
            )
            if not verdict.passed:
                run.status = "escalated"
                self._emit(
                    events.Escalated(
                        index=-1,
                        goal="the final gate: " + "; ".join(self.cfg.accept_cmds),
                        summary="",  # no model's words: every task passed its own check
                        reason=verdict.reason,
                        next_steps=final_gate_steps(run.branch),
                    )
                )
                return RunOutcome(EXIT_ESCALATED, "the final acceptance gate failed")
        skipped = [i for i, t in enumerate(rt.state.plan) if t.status == "skipped"]
        replaced = replaced_message(rt.state, held_files(rt.state, rt.toolbox.blob_of))
        if skipped or replaced:  # work left uncommitted: the run is not all verified
            run.status = "skipped"
            said = [skipped_message(rt.state.plan, skipped) if skipped else "", replaced]
            return RunOutcome(EXIT_ESCALATED, "; ".join(m for m in said if m))
        return ending.settled_outcome(run, rt.state.plan)

    def _on_verdict(self, verdict: Verdict) -> None:
        """Keep the failure's signatures; the run's memory records a fix or looks one up."""
        found = []
        if not verdict.passed and verdict.output_tail:
            found = failure_signatures(verdict.output_tail)
            self.signatures += found
        if self.rt is not None and self.run is not None:
            self.mem.verdict(self.rt, verdict, found, self.run.run_id)

    # -- bookkeeping --------------------------------------------------------------------
    def _emit(self, event: events.Event) -> None:
        self.sv.console.emit(event)
        if self.run is not None:
            self.store.log(self.run.run_id, {"type": "event", **event.model_dump()})

    def save(self) -> None:
        """Write the run's whole state atomically, flushed to the disk when a task was verified
        (or skipped) since the last such save, or when the run is over."""
        if self.rt is None or self.run is None:
            return
        self.run.updated_at = utc_now()
        self.run.steps = self.rt.state.step
        self.run.agent_state = self.rt.state.to_dict()
        self.run.memory = dict(self.rt.memory.export_state())
        self.run.views = self.rt.views.to_dict()
        self.mem.learned.used(self.rt.toolbox.tools_used)  # a resumed run's episode has them all
        self.run.learned = self.mem.learned.to_dict()
        self.run.usage = self._usage()
        self.run.left_tree = self._work_tree_id()  # "": not known, so a resume cannot tell
        verified = _settled(self.rt.state)
        durable = verified != self._verified or self.run.status != "running"
        self.store.save(self.run, durable=durable)
        self._notes.clear()  # they are in the saved memory
        if durable:
            self._verified = verified

    def _work_tree_id(self) -> str:
        """The id of the tree the work tree holds now ("" when git cannot say)."""
        try:
            return self.sv.workspace.tree()
        except AgentError:
            return ""

    def _usage(self) -> RunUsage:
        """The run's usage: earlier sessions' and this one's."""
        assert self.rt is not None
        usage, base = self.models.usage(), self._base_usage
        return RunUsage(
            prompt_tokens=base.prompt_tokens + usage.prompt_tokens,
            completion_tokens=base.completion_tokens + usage.completion_tokens,
            cached_tokens=base.cached_tokens + usage.cached_tokens,
            cost_usd=self.rt.spent(),
            by_role=self.models.by_role(base.by_role),
        )

    def _noted(self, state: AgentState, item_id: str, text: str) -> None:
        """A note the model took: for learning, and for the next journal line."""
        self.mem.noted(state, item_id, text)
        self._notes.append(text)

    def _journal(self, record: StepRecord) -> None:
        """One tool call's line in the run's journal."""
        if self.run is None:
            return
        entry = JournalEntry(
            step=record.step,
            task=record.task,
            usage=self._usage(),
            added=record.added,
            notes=tuple(self._notes),
            may_change=record.may_change,
            tree=self._work_tree_id() if record.may_change else "",
        )
        self._notes.clear()
        self.store.journal(self.run.run_id, entry.model_dump_json())

    def _stepped(self, record: StepRecord) -> None:
        """A tool call done: its journal line; then working memory's budget and the tool output
        cap follow the model's window, when it turned out smaller meanwhile (`window.narrowed`)."""
        self._journal(record)
        if self.rt is None:
            return
        rt, limits = self.rt, self.rt.limits
        memory, limits.tool_output_max_tokens = narrowed(
            limits.window(), rt.model, rt.memory.max_tokens, limits.tool_output_max_tokens
        )
        if memory < rt.memory.max_tokens:
            rt.memory.set_budget(memory)

    def _replay(
        self, run: RunRecord, state: AgentState, memory: WorkingMemory, views: FileViews
    ) -> None:
        """Bring the saved state up to the last tool call its journal recorded."""
        entries = journal.parse(self.store.journal_lines(run.run_id))
        usage = journal.replay(
            entries,
            state,
            memory,
            lambda item_id, text: self.mem.noted(state, item_id, text),
            views,
        )
        if usage is not None:
            run.usage, run.steps = usage, state.step

    def _learn(self) -> None:
        if self.rt is None or self.run is None:
            return
        try:
            self.mem.remember(self.rt, self.run, self.signatures, self.cfg.accept_cmds, self._facts)
        except Exception as e:  # the run's outcome stands even if memory cannot take it
            why = e.one_line() if isinstance(e, AgentError) else str(e)  # with what to do
            self._emit(events.Notice(text=f"long-term memory not updated: {why}"))

    def _done(self, code: int, message: str) -> None:
        assert self.rt is not None and self.run is not None
        state, run = self.rt.state, self.run
        done = events.RunDone(
            run_id=run.run_id,
            status=run.status,
            exit_code=code,
            tasks=events.reported(state.plan, self.cfg.accept_cmds),
            steps=state.step,
            prompt_tokens=run.usage.prompt_tokens,
            completion_tokens=run.usage.completion_tokens,
            cached_tokens=run.usage.cached_tokens,
            cost_usd=run.usage.cost_usd,
            branch=run.branch,
            base=self._base_branch(),
            message=message,
            usage_by_role=_by_role(run.usage.by_role),
        )
        hooked.run_end(self.sv.hooks, self._emit, done)
        self._emit(done)

    def _base_branch(self) -> str:
        """The branch the run started from (runs saved before it was recorded have none)."""
        return self.run.base_branch if self.run is not None else ""


def _by_role(usage: dict[str, RoleUsage]) -> dict[str, dict[str, Any]]:
    """Each role's usage as `run_done` gives it."""
    return {role: used.model_dump() for role, used in usage.items()}
