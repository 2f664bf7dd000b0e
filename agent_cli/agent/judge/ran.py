"""Whether a check that exited 0 ran a test that passed, by what its test runner printed.

A test run can exit 0 without proving anything: unittest before Python 3.12 exits 0 when it
finds no test (`Ran 0 tests`), both pytest and unittest exit 0 when every test they ran was
skipped or expected to fail (`3 skipped in 0.01s`, `OK (skipped=3)`), as a task that marks
the failing test `skip` or `xfail` leaves it, and pytest exits 0 having run none when its
settings only collect or list (`addopts = --collect-only` in a `pytest.ini` the task wrote:
`3 tests collected in 0.01s`; `no tests ran in 0.01s`). Such a check does not pass. The
runner's own summary lines are read (at the start of a line, escape sequences aside; a pytest line
counts only when every count in it is one pytest prints); output with none is not judged
here, and a command that runs the runner more than once proves nothing only when every run
passed none.

A command that runs pytest itself (`pytest -q`, `python -m pytest`) and exits 0 must have
printed pytest's summary line: pytest prints one at the end of every run unless it is told
to be quieter than `-q` (`-qq`, `--verbosity=-2`, `-p no:terminal` in the command or in
`PYTEST_ADDOPTS`). Without it the run ended before pytest did, as when code it imports calls
`os._exit(0)`: the check does not pass. (Under a `-qq` in a settings file, which is not
read, pytest prints only its progress, `..s [100%]`: that shows it ran to the end and which
tests passed, and is read as its summary would be.) Whatever runs pytest (`make test`, `sh -c
'pytest'`), a run that printed pytest's header (`=== test session starts ===`, at the default
verbosity) and no summary after it ended early too. Likewise `python -m
unittest` must have printed its `Ran N tests` line, which it prints whatever its options.

Code under test can print a summary line of its own. A check's pytest captures what that code
prints (`workspace/shell/checkpytest.py`: a fake `5 passed in 0.01s` printed at import before
`os._exit(0)` is never seen, so the run reads as cut short), but not what it prints once pytest
has finished (an `atexit` function): a command that runs pytest itself runs it once, so its
first summary is pytest's and is the one read. unittest captures nothing: a `Ran 5 tests ...
OK` its code prints is read as unittest's.

Two rules read the counts in those summaries (`counted`: tests passed, with `xpassed`; failed
or in error; skipped or expected to fail, with `xfailed`; pytest-rerunfailures' `rerun`,
`warnings` and `deselected` count in none):

- A check that exited 0 while a runner's own summary counts tests that failed or were in
  error (`3 failed, 1 passed in 0.03s`, `1 error`, `F` or `E` in pytest's progress, unittest's
  `FAILED (failures=1)`) does not pass (`failures_counted`). Neither runner ever exits 0 then:
  something else decided the exit code, such as an `atexit` function in the code under test
  that calls `os._exit(0)` once pytest printed its summary, or a wrapper whose status is not
  pytest's (`sh -c 'pytest | sed -n p'`, `sh -c 'pytest || (true)'`).
- A check that passes with more tests skipped or expected to fail than its run before the
  task (verifier.Proofs.baseline, kept per command in `Task.baseline_counts`), while its passed
  count grew by less than that run's failed count (when at least 1 failed then), does not pass
  (`more_skipped`): the tests that failed are skipped now, not passing. Code under test can do
  that without touching a test (`pytest.skip()` inside the function they call). A task that
  makes the failing tests pass and also adds a test skipped on this platform passes. Only the
  numbers are compared, not which tests they are (a task that adds as many new passing tests as
  it skips failing ones is not caught), and only when the run before the task was counted: a
  run resumed from a state saved before the counts were kept has none, and the rule is left out.

Known limit: code under test runs inside the test runner's process and can always forge what
the runner seems to print. It can write a summary line of its own (`4 passed in 0.01s`) to the
descriptor pytest's `--capture=fd` keeps for the real output (its `dup` of stdout) and then
exit 0 at once: that line is read as pytest's. The harness reads what the test runner reports;
it is not a security boundary against the code it tests.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from agent_cli.agent.judge.acceptance import PYTEST_VALUED, lists_only, pytest_args, python_run
from agent_cli.core.models import Tally
from agent_cli.workspace.shell.cmdline import is_python, unwrap
from agent_cli.workspace.shell.screen import without_escapes

# unittest's summary: "Ran 3 tests in 0.001s", a blank line, then "OK (skipped=3)" when it
# passed, "FAILED (failures=1, errors=2)" when it did not
_UNITTEST_RAN = re.compile(
    r"^Ran (\d+) tests? in [^\n]*\n\s*(?:(OK|FAILED)(?: \(([^)\n]*)\))?)?", re.M
)
# pytest's last line: "==== 1 skipped, 1 xfailed in 0.02s ====" ("1 skipped in 0.02s" with -q;
# "in 0.02 seconds" before pytest 5)
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ [a-z ]+, )*\d+ [a-z ]+|no tests ran) in \d+(?:\.\d+)? ?s(?:econds)?\b"
    r"[^\n]*$",
    re.M,
)
# what pytest counts in that line (`subtests passed` and the like too), and in which count of
# a Tally each goes (None: none; `rerun` is a try of a test counted once more by its outcome)
_PYTEST_KINDS: dict[str, str | None] = {
    "passed": "passed",
    "xpassed": "passed",
    "failed": "failed",
    "error": "failed",
    "errors": "failed",
    "skipped": "skipped",
    "xfailed": "skipped",
    "warning": None,
    "warnings": None,
    "deselected": None,
    "rerun": None,
    "test collected": None,
    "tests collected": None,
}
# unittest's counts in its `OK (...)` or `FAILED (...)`, likewise
_UNITTEST_KINDS = {
    "failures": "failed",
    "errors": "failed",
    "unexpected successes": "failed",
    "skipped": "skipped",
    "expected failures": "skipped",
}
# pytest's progress at -qq, where it prints no summary: one character a test, "." for a pass
# ("F" failed, "E" error, "s" skipped, "x" xfailed, "X" xpassed, "R" rerun), then how far along
_PYTEST_PROGRESS = re.compile(r"^([.FEsxXR]+)\s*\[\s*(\d+)%\]$", re.M)
_PROGRESS_KINDS = {".": "passed", "X": "passed", "F": "failed", "E": "failed"}
_PROGRESS_KINDS |= {"s": "skipped", "x": "skipped"}
# pytest's header, printed (at -q and above none is) when a run begins, whatever runs pytest
_PYTEST_HEADER = re.compile(r"^=+ test session starts =+$", re.M)
_PYTEST_CUT = (
    "pytest printed no summary line (such as `3 passed in 0.05s`): the run ended before "
    "pytest finished, as when code it imports exits the process"
)
# pytest-sugar's summary, which takes the place of pytest's own
_SUGAR_SUMMARY = re.compile(r"^Results \(\d", re.M)


@dataclass(frozen=True)
class _Run:
    """One run of a test runner as its summary (or pytest's progress) reports it."""

    runner: str  # "pytest" or "unittest"
    line: str  # the summary as printed, decoration aside
    tally: Tally


def counted(output: str, argv: list[str] | None = None) -> Tally | None:
    """What the test runners' summaries in `output` counted, added up over their runs; None
    when there is none. `argv` as at no_test_passed: a pytest run itself counts once."""
    runs = _runs(output, argv)
    if not runs:
        return None
    return Tally(
        passed=sum(run.tally.passed for run in runs),
        failed=sum(run.tally.failed for run in runs),
        skipped=sum(run.tally.skipped for run in runs),
    )


def failures_counted(output: str, argv: list[str] | None = None) -> str | None:
    """Why a check that exited 0 with `output` does not pass although it did: a test runner's
    own summary in it counts tests that failed or were in error, or None. Neither pytest nor
    unittest exits 0 then: something else decided the exit code."""
    for run in _runs(output, argv):
        if run.tally.failed:
            return (
                f"{run.runner}'s own summary counts tests that failed or were in error "
                f"(`{run.line}`), and {run.runner} never exits 0 then: something other than "
                "the test runner decided the exit code (an `atexit` function in the code under "
                "test, a pipe into a filter)"
            )
    return None


def more_skipped(before: Tally, now: Tally) -> str | None:
    """Why a passing run counted `now` does not pass against the run before the task counted
    `before`, or None: more tests are skipped or expected to fail than before, and fewer tests
    pass more than failed then. A test that failed before and is skipped now has not passed."""
    more, grew = now.skipped - before.skipped, now.passed - before.passed
    if more <= 0 or before.failed < 1 or grew >= before.failed:
        return None
    are = "test more is" if more == 1 else "tests more are"
    passing = (
        "no test that failed before passes now"
        if grew <= 0
        else f"only {grew} test{'s' if grew > 1 else ''} more "
        f"pass{'' if grew > 1 else 'es'} than before, of the {before.failed} that failed then"
    )
    return (
        f"{more} {are} skipped or expected to fail than before the task ({before.skipped} then, "
        f"{now.skipped} now), and {passing}: a skipped test does not pass"
    )


def no_test_passed(output: str, argv: list[str] | None = None) -> str | None:
    """Why a check whose `output` this is proved nothing although it exited 0, or None.
    `argv`: the check, which when it runs pytest itself runs it once: its first summary is
    pytest's, a later one something else's (code under test printing at exit)."""
    runs = _runs(output, argv)
    unittest = [run.tally.passed > 0 for run in runs if run.runner == "unittest"]
    if unittest and not any(unittest):
        return "unittest ran no test that passed (none found, or each skipped)"
    pytest = [run.tally.passed > 0 for run in runs if run.runner == "pytest"]
    if pytest and not any(pytest):
        return "pytest ran no test that passed (each skipped or expected to fail, or none run)"
    return None


def _runs(output: str, argv: list[str] | None) -> list[_Run]:
    """The test runs whose summaries `output` holds: each unittest run, and each pytest run
    (by its progress when it printed no summary), of which only the first when `argv` runs
    pytest itself."""
    output = without_escapes(output)
    pytest = _pytest_runs(output) or _progress_runs(output)
    if argv is not None and pytest_args(argv) is not None:
        pytest = pytest[:1]
    return _unittest_runs(output) + pytest


def _unittest_runs(output: str) -> list[_Run]:
    runs = []
    for match in _UNITTEST_RAN.finditer(output):
        ran, said, details = int(match.group(1)), match.group(2), match.group(3) or ""
        counts = _tallied(_counts(details, "="), _UNITTEST_KINDS)
        counts["passed"] = max(ran - counts["failed"] - counts["skipped"], 0)
        line = f"{said} ({details})" if said and details else said or match.group(0).strip()
        runs.append(_Run("unittest", line, Tally(**counts)))
    return runs


def _pytest_runs(output: str) -> list[_Run]:
    runs = []
    for match in _PYTEST_SUMMARY.finditer(output):
        found = _counts(match.group(1), " ")
        if {kind.removeprefix("subtests ") for kind in found} <= set(_PYTEST_KINDS):
            line = match.group(0).strip("= \t")  # "no tests ran" counts nothing
            runs.append(_Run("pytest", line, Tally(**_tallied(found, _PYTEST_KINDS))))
    return runs


def _progress_runs(output: str) -> list[_Run]:
    """Each pytest run whose progress `output` shows (a `-qq` in the repository's own
    settings prints no summary), counted by its characters."""
    runs, marks = [], ""
    for match in _PYTEST_PROGRESS.finditer(output):
        marks += match.group(1)
        if match.group(2) == "100":
            counts = dict.fromkeys(("passed", "failed", "skipped"), 0)
            for mark in marks:
                if kind := _PROGRESS_KINDS.get(mark):
                    counts[kind] += 1
            runs.append(_Run("pytest", match.group(0).strip(), Tally(**counts)))
            marks = ""
    return runs


def _counts(text: str, separator: str) -> dict[str, int]:
    """`1 skipped, 2 xfailed` (or `skipped=1, expected failures=2`) as {kind: number}."""
    found: dict[str, int] = {}
    for part in text.split(","):
        left, _, right = part.strip().partition(separator)
        number, kind = (left, right) if separator == " " else (right, left)
        if number.strip().isdigit():
            found[kind.strip()] = int(number)
    return found


def _tallied(found: dict[str, int], kinds: Mapping[str, str | None]) -> dict[str, int]:
    """`found` (_counts) added up into a Tally's counts, by the count `kinds` names for each."""
    totals = dict.fromkeys(("passed", "failed", "skipped"), 0)
    for kind, number in found.items():
        if name := kinds.get(kind.removeprefix("subtests ")):
            totals[name] += number
    return totals


def cut_short(argv: list[str], output: str) -> str | None:
    """Why a pytest or unittest run that exited 0 with `output` ended before the runner
    finished, or None (neither run directly, told to print no summary, or one printed)."""
    output = without_escapes(output)
    if _runs_unittest(argv) and not _UNITTEST_RAN.search(output):
        return (
            "unittest printed no `Ran N tests` line: the run ended before unittest finished, "
            "as when code it imports exits the process"
        )
    summaries = len(_PYTEST_SUMMARY.findall(output)) + len(_SUGAR_SUMMARY.findall(output))
    if len(_PYTEST_HEADER.findall(output)) > summaries:
        return _PYTEST_CUT  # a run that began (`make test`, `sh -c 'pytest'`) and never ended
    args = pytest_args(argv)
    if args is None or lists_only(args) or summaries or _progress_runs(output):
        return None  # a progress line at 100%: pytest ran every test (`-qq` in its settings)
    addopts = [os.environ.get("PYTEST_ADDOPTS", "")]
    addopts += [w.split("=", 1)[1] for w in argv if w.startswith("PYTEST_ADDOPTS=")]
    try:
        args = [arg for opts in addopts for arg in shlex.split(opts)] + args
    except ValueError:
        return None
    if _verbosity(args) < -1 or _no_terminal(args):
        return None
    return _PYTEST_CUT


def _runs_unittest(argv: list[str]) -> bool:
    """Whether `argv` (wrappers aside) is `python -m unittest ...`."""
    argv = unwrap(argv)
    if not argv or not is_python(os.path.basename(argv[0])):
        return False
    kind, rest = python_run(argv[1:])
    return kind == "m" and rest[:1] == ["unittest"]


def _verbosity(args: list[str]) -> int:
    """pytest's verbosity from its arguments: `-v` adds one, `-q` takes one away."""
    level = 0
    for arg in args:
        if arg.startswith("--verbosity="):
            value = arg.split("=", 1)[1]
            level = int(value) if value.lstrip("-").isdigit() else level
        elif arg in ("--verbose", "--quiet"):
            level += 1 if arg == "--verbose" else -1
        elif arg[:1] == "-" and arg[1:2] not in ("-", ""):
            for letter in arg[1:]:
                if letter in PYTEST_VALUED:
                    break
                level += {"v": 1, "q": -1}.get(letter, 0)
    return level


def _no_terminal(args: list[str]) -> bool:
    """Whether pytest's terminal reporter is turned off (`-p no:terminal`)."""
    plugins = [b for a, b in zip(args, args[1:], strict=False) if a == "-p"]
    plugins += [arg[2:] for arg in args if arg.startswith("-p") and len(arg) > 2]
    return "no:terminal" in plugins
