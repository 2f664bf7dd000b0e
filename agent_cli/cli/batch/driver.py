"""A batch's runs: one `agent run --worktree --json` process per goal, N at a time.

Each run is a process of its own in its own process group, read through its JSON events (a
thread per run puts each line on one queue, so the driver alone changes the jobs). Ctrl-C (or
SIGTERM, or SIGHUP: the terminal closing, or a closed pipe: what read the batch's output is
gone) sends SIGTERM to every running group, which a run takes as Ctrl-C from its first
moment (SIGINT would not do: a batch started in the background of a script hands its runs
SIGINT ignored), and the driver waits for each to save its state and exit; a second stop
(Ctrl-C, SIGTERM, SIGHUP) waits too, and a run that does not exit within `STOP_GRACE_S` is
killed. An error of the batch's own stops the runs the same way before it is said (`failure`),
so that the record is still written. A goal whose run cannot be started at all (the system
refuses its command line, has no file descriptor left, ...) fails with the system's reason,
and the others go on. No process outlives the batch, and a run whose batch was killed stops
as interrupted when its events find no reader. A run killed by a signal (the OOM killer's
SIGKILL, the batch's own after the grace) is recorded as `agent runs` shows it, the signal
named. A shared budget starts no new run once spent, gives each run what is left, and stops
the running ones (SIGTERM, state saved) when their spend together reaches it: such a run is
`budget_exhausted`, in its progress line as in the table.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, get_args

from agent_cli.agent.run.store import FINISHED, RunStatus
from agent_cli.cli.batch.goals import Goal
from agent_cli.core.errors import (
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_ESCALATED,
    EXIT_INTERRUPTED,
    EXIT_OK,
)
from agent_cli.ui import stopping
from agent_cli.workspace.shell import reaper

STOP_GRACE_S = 60.0  # how long a run gets to save its state after SIGTERM
POLL_S = 0.25
NOT_STARTED = "not_started"


@dataclass
class Job:
    """One goal of the batch and what its run has shown so far."""

    index: int  # 1-based, in the file's order
    goal: Goal
    status: str = "waiting"
    run_id: str = ""
    branch: str = ""
    base: str = ""
    task: int = 0
    tasks: int = 0
    steps: int = 0
    cost_usd: float = 0.0
    exit_code: int | None = None
    proofs: list[str | None] = field(default_factory=list)
    worktree: str = ""  # the worktree kept for the human ("" when removed)
    message: str = ""
    peak_rss_mb: float = 0.0
    seconds: float = 0.0
    budget_stopped: bool = False  # stopped because the batch's budget was spent
    cap_usd: float | None = None  # the budget the run was given
    signum: int = 0  # the signal that killed the run's process (0: it exited)
    killed_why: str = ""  # why the batch killed it, when it did
    done_seen: bool = False
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    started: float = 0.0

    def take(self, ev: dict[str, Any]) -> None:
        """Follow one event of the run."""
        kind = ev.get("event")
        if kind == "run_started":
            self.run_id, self.branch = str(ev.get("run_id", "")), str(ev.get("branch", ""))
            self.base, self.status = str(ev.get("base", "")), "running"
        elif kind == "plan":
            self.tasks = len(ev.get("tasks") or [])
        elif kind == "task_started":
            self.task = int(ev.get("index", 0)) + 1
        elif kind == "tool_result":
            self.steps = int(ev.get("step", self.steps))
            self.cost_usd = float(ev.get("cost_usd", self.cost_usd))
        elif kind == "run_done":
            self.done_seen = True
            self.run_id = str(ev.get("run_id") or self.run_id)
            self.branch = str(ev.get("branch") or self.branch)
            self.status = self.budget_said(str(ev.get("status", "failed")))
            self.steps = int(ev.get("steps", self.steps))
            self.cost_usd = float(ev.get("cost_usd", self.cost_usd))
            self.message = str(ev.get("message", ""))
            self.proofs = [t.get("proof") for t in ev.get("tasks") or [] if isinstance(t, dict)]

    def budget_said(self, status: str) -> str:
        """`status` as the batch says it: a run it stopped for its shared budget stopped as
        interrupted, and is `budget_exhausted` (its progress line and the table say the same)."""
        return "budget_exhausted" if self.budget_stopped and status == "interrupted" else status

    def killed(self) -> str:
        """How the run's process was killed ("" when it exited)."""
        if not self.signum:
            return ""
        name = _signal_name(self.signum)
        said = (
            f"killed by {name} (signal {self.signum})"
            if name
            else f"killed by signal {self.signum}"
        )
        return f"{said}: {self.killed_why}" if self.killed_why else said

    def resume_command(self) -> str:
        """How the human continues this run on its own ("" when there is nothing to continue)."""
        if not self.run_id or self.status in FINISHED or self.status == NOT_STARTED:
            return ""
        answer = ' --hint "..."' if self.exit_code == EXIT_ESCALATED else ""
        return f"agent run --resume --run-id {self.run_id}{answer}"

    def record(self) -> dict[str, Any]:
        """What batch.json says of this run."""
        return {
            "index": self.index,
            "goal": self.goal.goal,
            "run_id": self.run_id,
            "branch": self.branch,
            "status": self.status,
            "exit_code": self.exit_code,
            "cost_usd": round(self.cost_usd, 6),
            "steps": self.steps,
            "proofs": self.proofs,
            "worktree": self.worktree or None,
            "message": self.message,
            "resume": self.resume_command() or None,
            "seconds": round(self.seconds, 2),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
        }


@dataclass
class Launch:
    """How every run of the batch is started."""

    repo: Path
    state_dir: Path
    logs: Path  # the batch's directory: each run's events and stderr
    run_args: list[str] = field(default_factory=list)  # --model, --base-url, ...
    env: dict[str, str] | None = None
    argv0: list[str] = field(default_factory=lambda: [sys.executable, "-m", "agent_cli"])

    def argv(self, job: Job, budget_usd: float | None) -> list[str]:
        """`agent run --worktree --json --yes ... -- GOAL` for one job."""
        args = [*self.argv0, "run", "--worktree", "--json", "--yes", "--repo", str(self.repo)]
        args += self.run_args
        for cmd in job.goal.accept:
            args += ["--accept", cmd]
        if job.goal.max_steps is not None:
            args += ["--max-steps", str(job.goal.max_steps)]
        if budget_usd is not None:
            args += ["--budget-usd", f"{budget_usd:.6f}"]
        return [*args, "--", job.goal.goal]


class Batch:
    """Runs the jobs N at a time; every event goes to `on_event`, every change to `on_change`."""

    def __init__(
        self,
        goals: list[Goal],
        launch: Launch,
        jobs: int,
        budget_usd: float | None,
        on_event: Callable[[Job, dict[str, Any]], None],
        on_change: Callable[[list[Job]], None],
    ) -> None:
        self.jobs = [Job(i, g) for i, g in enumerate(goals, 1)]
        self.launch, self.width, self.budget = launch, max(1, jobs), budget_usd
        self.on_event, self.on_change = on_event, on_change
        self.interrupted = False
        self.failure: Exception | None = None  # an error of the batch's own, said after the record
        self.reader_gone = False  # what read the batch's output closed it
        self._stopping = False
        self._lines: queue.Queue[tuple[Job, bytes | None]] = queue.Queue()
        self._live: dict[int, Job] = {}
        self._logs: dict[int, IO[bytes]] = {}
        self._ttys: list[int] = []  # the standard streams that are the batch's terminal

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> int:
        """Run every job (or as many as the budget allows); the batch's exit code."""
        self._ttys = [fd for fd in (0, 1, 2) if _isatty(fd)]  # a closed one no longer says
        before = {sig: signal.getsignal(sig) for sig in stopping.STOPS}
        stopping.stop_as_interrupt()  # SIGTERM, or the terminal closing
        # what a run killed outright leaves (a hook, a server: each in a session of its own)
        # comes to the batch instead of to init, and is killed at the end
        spared = reaper.adopt_orphans()
        try:
            try:
                self._loop()
            except KeyboardInterrupt:
                self.interrupted = True
                self._stop_all()
            except Exception as e:  # the batch's own: its runs stop as on Ctrl-C, state saved
                self.failure = e
                with contextlib.suppress(Exception):  # what is left is killed below
                    self._stop_all()
        finally:
            self._kill_left()
            reaper.kill_leftovers(spared)
            stopping.restore(before)
        return self.exit_code()

    def _loop(self) -> None:
        waiting = deque(self.jobs)
        while waiting or self._live:
            while waiting and len(self._live) < self.width:
                job = waiting.popleft()
                if not self._start(job):
                    for rest in waiting:
                        rest.status = NOT_STARTED
                        rest.message = "the batch's budget was spent"
                    waiting.clear()
            self._drain(POLL_S)
            self._hold_budget()

    def _drain(self, wait_s: float) -> None:
        """Handle the lines that came in (waiting up to `wait_s` for the first)."""
        try:
            job, line = self._lines.get(timeout=wait_s)
        except queue.Empty:
            self._tell(self.on_change, self.jobs)
            return
        while True:
            if line is None:
                self._reap(job)
            else:
                self._line(job, line)
            try:
                job, line = self._lines.get_nowait()
            except queue.Empty:
                break
        self._tell(self.on_change, self.jobs)

    def _tell(self, show: Callable[..., None], *args: Any) -> None:
        """Pass a run's event or the runs' progress on to the batch's output. When what reads
        it is gone (a closed pipe: `| head` has read enough, the reader was killed), the batch
        stops as on Ctrl-C, each run's state saved to resume, and shows nothing more."""
        if self.reader_gone:
            return
        try:
            show(*args)
        except BrokenPipeError:
            self.reader_gone = True
            stopping.detach([sys.stdout.fileno()])  # what is left to flush goes nowhere
            if not self._stopping:
                raise KeyboardInterrupt from None
        except Exception:
            if self.failure is None:
                raise
            # the batch is stopping on an error of its own (perhaps this very output's): the
            # runs' saving their state matters more than showing it

    def _stop_all(self) -> None:
        """SIGTERM to every running run's process group, then wait for each to exit (a run
        still going after `STOP_GRACE_S` is killed by `run`). A second stop, from here to the
        end of `run`, waits too: cutting the wait short would kill runs that are saving their
        state, and lose the record."""
        for sig in stopping.STOPS:
            signal.signal(sig, self._stopped_again)
        self._stopping = True
        why = "the batch stopped on an error" if self.failure else "the batch was interrupted"
        for job in self.jobs:
            if job.status == "waiting":
                job.status, job.message = NOT_STARTED, why
        self._signal_live(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self._live and time.monotonic() < deadline:
            self._drain(POLL_S)

    def _stopped_again(self, signum: int, frame: object) -> None:
        """Ctrl-C, SIGTERM or SIGHUP while the runs save their state: the wait goes on. A
        closed terminal takes its streams with it: they are pointed at /dev/null, so that the
        summary and the record still get written."""
        if signum == signal.SIGHUP:
            stopping.detach(self._ttys)

    def _kill_left(self) -> None:
        """Kill (and reap) any run still going: none outlives the batch."""
        late = f"it had not stopped {STOP_GRACE_S:g} s after SIGTERM"
        for job in self._live.values():
            job.killed_why = late if self._stopping else "the batch killed it on its way out"
        self._signal_live(signal.SIGKILL)
        while self._live:
            self._drain(POLL_S)

    # -- one run ------------------------------------------------------------------------
    def _start(self, job: Job) -> bool:
        """Start `job`'s run; False when the batch's budget is spent."""
        budget = job.goal.budget_usd
        if self.budget is not None:
            left = self.budget - self.spent()
            if left <= 0:
                job.status, job.message = NOT_STARTED, "the batch's budget was spent"
                return False
            budget = left if budget is None else min(budget, left)
        job.cap_usd = budget
        try:
            events = self._spawn(job, budget)
        except OSError as e:  # this goal's alone (its command line too long for the system,
            # no file descriptor left, ...): it fails, and the batch goes on with the others
            job.status, job.message = "failed", f"its run could not be started: {_said(e)}"
            self._tell(self.on_event, job, {"event": "job_done", **job.record()})
            return True
        job.status, job.started = "starting", time.monotonic()
        self._live[job.index], self._logs[job.index] = job, events
        threading.Thread(target=self._read, args=(job,), daemon=True).start()
        return True

    def _spawn(self, job: Job, budget: float | None) -> IO[bytes]:
        """Start `job`'s run process; the file its events are copied to."""
        self.launch.logs.mkdir(parents=True, exist_ok=True)
        events = open(self.launch.logs / f"{job.index}.events.jsonl", "wb")  # noqa: SIM115
        try:
            with open(self.launch.logs / f"{job.index}.stderr.txt", "wb") as err:
                job.proc = subprocess.Popen(
                    self.launch.argv(job, budget),
                    cwd=self.launch.repo,
                    env=self.launch.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,  # its own group: the batch forwards Ctrl-C itself
                )
        except BaseException:
            events.close()
            raise
        return events

    def _read(self, job: Job) -> None:
        assert job.proc is not None and job.proc.stdout is not None
        for line in job.proc.stdout:
            self._lines.put((job, line))
        self._lines.put((job, None))

    def _line(self, job: Job, line: bytes) -> None:
        self._logs[job.index].write(line)
        try:
            ev = json.loads(line)
        except ValueError:
            return
        if not isinstance(ev, dict):
            return
        job.take(ev)
        self._tell(self.on_event, job, ev)

    def _reap(self, job: Job) -> None:
        """The run's process has closed its output: wait for it, note its exit and memory."""
        assert job.proc is not None
        _, waited, usage = os.wait4(job.proc.pid, 0)
        job.proc.returncode = code = os.waitstatus_to_exitcode(waited)
        job.signum = -code if code < 0 else 0
        job.exit_code = 128 + job.signum if job.signum else code  # as a shell says it
        job.peak_rss_mb = usage.ru_maxrss / 1024  # KiB on Linux
        job.seconds = time.monotonic() - job.started
        self._logs.pop(job.index).close()
        self._live.pop(job.index, None)
        if job.proc.stdout is not None:
            job.proc.stdout.close()
        saved = self._saved(job)
        if not job.done_seen:
            tail = _tail(self.launch.logs / f"{job.index}.stderr.txt")
            if job.signum:  # as `agent runs` shows it: what it saved, or interrupted
                ended = saved.get("status")
                job.status = ended if isinstance(ended, str) and ended in _ENDED else "interrupted"
                job.message = "; ".join(s for s in (job.killed(), tail) if s)
            else:
                job.status = "interrupted" if code == EXIT_INTERRUPTED else "failed"
                job.message = job.message or tail
        job.status = job.budget_said(job.status)
        tree = saved.get("worktree")
        job.worktree = str(tree) if isinstance(tree, str) and tree and Path(tree).is_dir() else ""
        self._tell(self.on_event, job, {"event": "job_done", **job.record()})

    def _saved(self, job: Job) -> dict[str, Any]:
        """The run's state.json ({} when it has none, or none that can be read)."""
        if not job.run_id:
            return {}
        try:
            state = json.loads(
                (self.launch.state_dir / "runs" / job.run_id / "state.json").read_text("utf-8")
            )
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    # -- money and signals ----------------------------------------------------------------
    def spent(self) -> float:
        """What the batch's runs have spent so far."""
        return sum(job.cost_usd for job in self.jobs)

    def _hold_budget(self) -> None:
        """Stop the running runs once their spend together passes the batch's budget (a run
        at its own cap, what was left when it started, stops itself)."""
        if self.budget is None or self.spent() <= self.budget:
            return
        for job in self._live.values():
            at_cap = job.cap_usd is not None and job.cost_usd >= job.cap_usd
            if not job.budget_stopped and not at_cap:
                job.budget_stopped = True
                _signal_group(job, signal.SIGTERM)

    def _signal_live(self, sig: int) -> None:
        for job in list(self._live.values()):
            _signal_group(job, sig)

    def exit_code(self) -> int:
        """In this order: 130 the batch was interrupted; 1 an error of the batch's own, or a
        run failed (an error); 130 a run was interrupted on its own (stopped, or killed by a
        signal: resumable); 4 a budget ran out; 3 a run escalated; 0 every run verified."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.failure is not None:
            return EXIT_ERROR
        ended = (EXIT_OK, EXIT_ESCALATED, EXIT_BUDGET, EXIT_INTERRUPTED, None)
        if any(
            (j.status == "failed" or (j.exit_code not in ended and not j.signum))
            and not j.budget_stopped
            for j in self.jobs
        ):
            return EXIT_ERROR
        if any(j.status == "interrupted" for j in self.jobs):
            return EXIT_INTERRUPTED
        if any(
            j.budget_stopped or j.status == NOT_STARTED or j.exit_code == EXIT_BUDGET
            for j in self.jobs
        ):
            return EXIT_BUDGET
        if any(j.exit_code == EXIT_ESCALATED for j in self.jobs):
            return EXIT_ESCALATED
        return EXIT_OK


_ENDED = set(get_args(RunStatus)) - {"running"}  # a status a run saves as it ends


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal has no name of its own
        return ""


def _said(e: OSError) -> str:
    """The system's reason, in one line: `Argument list too long (E2BIG): /usr/bin/python3`."""
    said = " ".join((e.strerror or str(e)).split())
    code = errno.errorcode.get(e.errno or 0, "")
    said += f" ({code})" if code else ""
    return f"{said}: {e.filename}" if e.filename else said


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _signal_group(job: Job, sig: int) -> None:
    if job.proc is None or job.proc.returncode is not None:
        return
    try:
        os.killpg(job.proc.pid, sig)
    except ProcessLookupError:
        pass


def _tail(path: Path) -> str:
    try:
        lines = path.read_text("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
