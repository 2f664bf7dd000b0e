"""A whole run: preflight, recall, plan, approve, dispatch each task, final gate, learn, report.

The session gets every heavy object ready-made (model, memories, repository, console)
from the command layer, so it never reads settings nor imports a vendor SDK. After every
step the run's state is saved atomically; `resume()` continues the first task that is
not verified without planning again.
"""

from __future__ import annotations

import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from agent_cli import events
from agent_cli.agent import closing, learn, planner, replan
from agent_cli.agent.dispatch import dispatch_and_verify
from agent_cli.agent.escalate import Answer, Escalation, check_answer, next_steps, skipped_message
from agent_cli.agent.executor import Limits, Runtime
from agent_cli.agent.runstore import RunStore, new_run_id, utc_now
from agent_cli.agent.state import AgentState
from agent_cli.agent.toolbox import Toolbox
from agent_cli.agent.verifier import run_acceptance
from agent_cli.errors import (EXIT_BUDGET, EXIT_ERROR, EXIT_ESCALATED, EXIT_INTERRUPTED, EXIT_OK,
                              AgentError, BudgetExhausted)
from agent_cli.models import MAX_ATTEMPTS, Plan, Verdict


@dataclass
class RunConfig:
    """Plain values that shape one run."""

    accept_cmds: list[str] = field(default_factory=list)
    allow_dirty: bool = False
    plan_only: bool = False
    approve: bool = False  # ask the human to approve the plan
    limits: Limits = field(default_factory=lambda: Limits(200, 30, 5.0, 3000))
    secrets: tuple[str, ...] = ()
    replan: str = "after_task"  # or "off": no re-plan check after a verified task
    max_replans: int = 3  # re-plan checks the harness asks for in one run
    final_summary: bool = True  # ask the model for a closing summary for the human
    ask_human: bool = False  # a terminal to ask on when a task is rejected


@dataclass
class Services:
    """The objects a run works with, built by the command layer."""

    repo: Any  # workspace.git.GitRepo
    state_dir: Path
    model: Any  # ChatModel
    console: Any  # console.RunConsole
    open_longterm: Callable[[], Any]  # -> LongTermMemory
    open_memory: Callable[[Path], Any]  # run dir -> WorkingMemory
    make_toolbox: Callable[[Any, set[str]], Toolbox]  # (memory, protected) -> Toolbox
    workspace: Callable[[set[str]], Any]  # protected -> dispatch.Workspace
    lock: Any  # workspace.lock.RunLock
    allow_command: Callable[[str], None] = lambda cmd: None  # approved: run without asking


class Session:
    """One run of `agent run`, new or resumed."""

    def __init__(self, services: Services, config: RunConfig) -> None:
        self.sv = services
        self.cfg = config
        self.store = RunStore(services.state_dir, config.secrets)
        self.run: dict[str, Any] = {}
        self.rt: Runtime | None = None
        self.signatures: list[str] = []
        self._base_usage: dict[str, Any] = {}  # usage saved by earlier sessions of this run
        self._answer: Answer | None = None  # the human's answer given with --resume

    # -- starting -----------------------------------------------------------------------
    def start(self, goal: str) -> int:
        """Plan `goal` and carry it out; returns the exit code."""
        with self._before_run():
            protected = self.sv.repo.preflight(self.cfg.allow_dirty)
            longterm = self.sv.open_longterm()
            recalled = self._recall(longterm, goal)
            plan = self._plan(goal, recalled)
        if plan is None:
            self._done_early("planned", EXIT_OK, "the plan is shown; nothing was changed")
            return EXIT_OK
        run_id = new_run_id()
        branch = f"agent/{run_id}"
        self.sv.repo.start_branch(branch)
        self.run = {"run_id": run_id, "status": "running", "goal": goal, "branch": branch,
                    "base": self.sv.repo.head(), "accept_cmds": self.cfg.accept_cmds,
                    "protected": sorted(protected), "started_at": utc_now(),
                    "success_criteria": plan.success_criteria, "usage": {}}
        state = AgentState(goal=goal, plan=plan.tasks, budget_steps=self.cfg.limits.max_steps,
                           budget_usd=self.cfg.limits.budget_usd,
                           success_criteria=plan.success_criteria)
        memory = self.sv.open_memory(self.store.run_dir(run_id))
        memory.set_goal(goal)
        self.sv.console.emit(events.RunStarted(run_id=run_id, goal=goal, branch=branch,
                                               repo=str(self.sv.repo.root)))
        return self._execute(state, memory, protected, longterm, recalled, spent_before=0.0)

    @contextmanager
    def _before_run(self) -> Iterator[None]:
        """Until the run exists, an error or Ctrl-C still ends the event stream with run_done."""
        try:
            yield
        except AgentError as e:
            self._done_early("failed", e.exit_code, e.one_line())
            raise
        except KeyboardInterrupt:
            self._done_early("interrupted", EXIT_INTERRUPTED, "interrupted before the run started")
            raise

    def _done_early(self, status: str, code: int, message: str) -> None:
        usage = self.sv.model.usage if self.sv.model is not None else None
        self.sv.console.emit(events.RunDone(
            run_id="", status=status, exit_code=code, tasks=[], steps=0,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            cost_usd=usage.cost_usd if usage else 0.0, message=message))

    def _recall(self, longterm, goal: str) -> str:
        from agent_cli.memory.records import format_for_context

        results = longterm.recall(goal, k=5, kind="all", min_trust=0.5)
        return format_for_context(results) if results else ""

    def _plan(self, goal: str, recalled: str) -> Plan | None:
        files = self.sv.repo.list_files()
        messages = planner.plan_messages(goal, recalled, "\n".join(files[:300]),
                                         self.cfg.accept_cmds)
        plan, _ = planner.make_plan(self.sv.model, messages)
        event = events.PlanMade(goal=plan.goal or goal, tasks=[t.model_dump() for t in plan.tasks],
                                success_criteria=plan.success_criteria,
                                accept_cmds=self.cfg.accept_cmds)
        self.sv.console.emit(event)
        if self.cfg.plan_only:
            return None
        if self.cfg.approve and not self.sv.console.approve_plan(event):
            raise AgentError("the plan was not approved; nothing was changed",
                             "run again with a more precise goal")
        self._allow_acceptance(plan.tasks)
        return plan

    def _allow_acceptance(self, tasks) -> None:
        """The acceptance commands were approved with the plan: the model may run them unasked."""
        for cmd in [t.acceptance_cmd for t in tasks if t.acceptance_cmd] + self.cfg.accept_cmds:
            self.sv.allow_command(cmd)

    # -- resuming -----------------------------------------------------------------------
    def resume(self, run_id: str | None, answer: Answer | None = None) -> int:
        """Continue a saved run at its first task that is not verified (with the human's answer)."""
        with self._before_run():
            run_id = run_id or self.store.latest_unfinished()
            if run_id is None:
                raise AgentError("there is no unfinished run to resume",
                                 "start one with `agent run GOAL`")
            self.run = self.store.load(run_id)
            state = AgentState.from_dict(self.run["agent_state"])
            check_answer(state, answer, run_id)
        protected = set(self.run.get("protected", []))
        self.sv.repo.preflight(allow_dirty=True)
        self.sv.repo.ensure_on(self.run["branch"], protected)
        state.success_criteria = state.success_criteria or self.run.get("success_criteria", "")
        for task in state.plan:
            if task.status == "running":
                task.status, task.attempts = "pending", max(task.attempts - 1, 0)
            elif task.status == "rejected" and answer is None:
                task.status, task.attempts, task.max_attempts = "pending", 0, MAX_ATTEMPTS
        self._answer = answer
        memory = self.sv.open_memory(self.store.run_dir(run_id))
        memory.import_state(self.run["memory"])
        longterm = self.sv.open_longterm()
        self.sv.console.emit(events.RunStarted(run_id=run_id, goal=state.goal, resumed=True,
                                               branch=self.run["branch"],
                                               repo=str(self.sv.repo.root)))
        self.sv.console.emit(events.PlanMade(goal=state.goal,
                                             tasks=[t.model_dump() for t in state.plan],
                                             success_criteria=state.success_criteria,
                                             accept_cmds=self.run.get("accept_cmds", [])))
        self.cfg.accept_cmds = self.run.get("accept_cmds", [])
        self._allow_acceptance(state.plan)
        recalled = self._recall(longterm, state.goal)
        spent = float(self.run.get("usage", {}).get("cost_usd", 0.0))
        return self._execute(state, memory, protected, longterm, recalled, spent_before=spent)

    # -- the loop -----------------------------------------------------------------------
    def _execute(self, state, memory, protected: set[str], longterm, recalled: str,
                 spent_before: float) -> int:
        run_id = self.run["run_id"]
        toolbox = self.sv.make_toolbox(memory, protected)
        self.rt = rt = Runtime(model=self.sv.model, toolbox=toolbox, memory=memory, state=state,
                               limits=self.cfg.limits, emit=self._emit,
                               log=lambda rec: self.store.log(run_id, rec), save=self.save,
                               recalled=recalled, spent_before=spent_before)
        self._base_usage = dict(self.run.get("usage") or {})
        ws = self.sv.workspace(protected)
        code, message = EXIT_ERROR, ""
        try:
            code, message = self._tasks(rt, ws)
            if self.cfg.final_summary:
                closing.summarise(rt, f"{self.run['status']}: {message}")
        except BudgetExhausted as e:
            self.run["status"], code, message = "budget_exhausted", EXIT_BUDGET, e.one_line()
            limit = "max_steps" if "step" in e.message else "budget_usd"
            self._emit(events.BudgetExhausted(budget=limit, used=e.message, limit=e.hint))
        except KeyboardInterrupt:
            self.run["status"], code = "interrupted", EXIT_INTERRUPTED
            message = "interrupted; the state is saved: continue with `agent run --resume`"
        except AgentError as e:
            self.run["status"], code, message = "failed", e.exit_code, e.one_line()
        except Exception as e:  # a bug must not lose the run: save, log, report in one line
            self.store.log(run_id, {"type": "crash", "traceback": traceback.format_exc()})
            self.run["status"], code = "failed", EXIT_ERROR
            message = f"internal error: {type(e).__name__}: {e} (trajectory has the traceback)"
        finally:
            self.save()
            self._learn(longterm)
            self._done(code, message)
        return code

    def _tasks(self, rt: Runtime, ws) -> tuple[int, str]:
        ask = self.sv.console.ask_escalation if self.cfg.ask_human else None
        escalation = Escalation(rt, ws, ask, self.run["branch"], self._answer)
        index = 0
        while index < len(rt.state.plan):
            task = rt.state.plan[index]
            if task.status in ("verified", "skipped"):
                index += 1
                continue
            if task.status != "rejected" and dispatch_and_verify(
                    rt, ws, index, self.cfg.accept_cmds, self.run["run_id"],
                    verifier_model=self.sv.model, on_verdict=self._on_verdict):
                self._replan_after(rt, index)
                index += 1
                continue
            outcome = escalation.resolve(index)
            if outcome == "stop":
                self.run["status"] = "escalated"
                return EXIT_ESCALATED, f"task {index + 1} needs you"
            index += outcome == "next"
        return self._final_gate(rt, ws)

    def _replan_after(self, rt: Runtime, index: int) -> None:
        """Ask whether the remaining tasks still make sense (within `max_replans`)."""
        if (self.cfg.replan == "after_task" and index + 1 < len(rt.state.plan)
                and rt.state.replans < self.cfg.max_replans):
            replan.revise(rt, index + 1)

    def _final_gate(self, rt: Runtime, ws) -> tuple[int, str]:
        if self.cfg.accept_cmds:
            verdict = run_acceptance(self.cfg.accept_cmds, ws.run_argv)
            self._on_verdict(verdict)
            self._emit(events.Verified(index=-1, attempt=1, passed=verdict.passed,
                                       judge="command", command=verdict.command,
                                       exit_code=verdict.exit_code, reason=verdict.reason[-2000:]))
            if not verdict.passed:
                self.run["status"] = "escalated"
                self._emit(events.Escalated(
                    index=-1, goal="the final gate: " + "; ".join(self.cfg.accept_cmds),
                    summary="every task passed its own check", reason=verdict.reason,
                    next_steps=next_steps(self.run["branch"], bool(ws.changed_files()), True)))
                return EXIT_ESCALATED, "the final acceptance gate failed"
        skipped = [i for i, t in enumerate(rt.state.plan) if t.status == "skipped"]
        if skipped:
            self.run["status"] = "skipped"
            return EXIT_ESCALATED, skipped_message(rt.state.plan, skipped)
        self.run["status"] = "verified"
        return EXIT_OK, "every task verified"

    def _on_verdict(self, verdict: Verdict) -> None:
        from agent_cli.memory.signatures import failure_signatures

        if not verdict.passed and verdict.output_tail:
            self.signatures += failure_signatures(verdict.output_tail)

    # -- bookkeeping --------------------------------------------------------------------
    def _emit(self, event) -> None:
        self.sv.console.emit(event)
        if self.run.get("run_id"):
            self.store.log(self.run["run_id"], {"type": "event", **event.model_dump()})

    def save(self) -> None:
        """Write the run's whole state atomically."""
        if self.rt is None:
            return
        usage = self.sv.model.usage
        base = self._base_usage
        self.run.update({
            "updated_at": utc_now(), "steps": self.rt.state.step,
            "agent_state": self.rt.state.to_dict(), "memory": self.rt.memory.export_state(),
            "usage": {"prompt_tokens": base.get("prompt_tokens", 0) + usage.prompt_tokens,
                      "completion_tokens": base.get("completion_tokens", 0)
                      + usage.completion_tokens,
                      "cost_usd": self.rt.spent()}})
        self.store.save(self.run["run_id"], self.run)

    def _learn(self, longterm) -> None:
        if self.rt is None:
            return
        state, tb = self.rt.state, self.rt.toolbox
        files = sorted(tb.touched)
        try:
            longterm.add_episode(learn.build_episode(self.run, state, tb.commands, files,
                                                     self.signatures))
            for text, source in learn.verified_facts(state, self.sv.repo.root.name,
                                                     self.run["run_id"], self.cfg.accept_cmds):
                longterm.add_fact(text, source, trust=1.0)
        except Exception as e:  # the run's outcome stands even if memory cannot take it
            self._emit(events.Notice(text=f"long-term memory not updated: {e}"))

    def _done(self, code: int, message: str) -> None:
        state = self.rt.state
        usage = self.run.get("usage", {})
        # A task still "running" here was cut short by the run's end: say so, not "running".
        tasks = [{"goal": t.goal, "attempts": t.attempts,
                  "status": "unfinished" if t.status == "running" else t.status,
                  "acceptance_cmd": t.acceptance_cmd or "; ".join(self.cfg.accept_cmds) or None,
                  "exit_code": t.exit_code, "commit": t.commit} for t in state.plan]
        self._emit(events.RunDone(run_id=self.run["run_id"], status=self.run["status"],
                                  exit_code=code, tasks=tasks, steps=state.step,
                                  prompt_tokens=usage.get("prompt_tokens", 0),
                                  completion_tokens=usage.get("completion_tokens", 0),
                                  cost_usd=usage.get("cost_usd", 0.0),
                                  branch=self.run.get("branch", ""), message=message))
