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
"""

from __future__ import annotations

import os
import re
import shlex

from agent_cli.agent.judge.acceptance import PYTEST_VALUED, lists_only, pytest_args, python_run
from agent_cli.workspace.shell.cmdline import is_python, unwrap
from agent_cli.workspace.shell.screen import without_escapes

# unittest's summary: "Ran 3 tests in 0.001s", a blank line, then "OK (skipped=3)" when it passed
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [^\n]*\n\s*(?:OK(?: \(([^)\n]*)\))?)?", re.M)
# pytest's last line: "==== 1 skipped, 1 xfailed in 0.02s ====" ("1 skipped in 0.02s" with -q;
# "in 0.02 seconds" before pytest 5)
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ [a-z ]+, )*\d+ [a-z ]+|no tests ran) in \d+(?:\.\d+)? ?s(?:econds)?\b"
    r"[^\n]*$",
    re.M,
)
# what pytest counts in that line (`subtests passed` and the like too)
_PYTEST_KINDS = {
    "passed",
    "failed",
    "skipped",
    "xfailed",
    "xpassed",
    "error",
    "errors",
    "warning",
    "warnings",
    "deselected",
    "rerun",
    "test collected",
    "tests collected",
}
# pytest's progress at -qq, where it prints no summary: one character a test, "." for a pass
# ("F" failed, "E" error, "s" skipped, "x" xfailed, "X" xpassed, "R" rerun), then how far along
_PYTEST_PROGRESS = re.compile(r"^([.FEsxXR]+)\s*\[\s*(\d+)%\]$", re.M)
# pytest's header, printed (at -q and above none is) when a run begins, whatever runs pytest
_PYTEST_HEADER = re.compile(r"^=+ test session starts =+$", re.M)
_PYTEST_CUT = (
    "pytest printed no summary line (such as `3 passed in 0.05s`): the run ended before "
    "pytest finished, as when code it imports exits the process"
)
# pytest-sugar's summary, which takes the place of pytest's own
_SUGAR_SUMMARY = re.compile(r"^Results \(\d", re.M)
# unittest's counts of a test that ran and proved nothing
_NOT_A_PASS = ("skipped", "expected failures")


def no_test_passed(output: str, argv: list[str] | None = None) -> str | None:
    """Why a check whose `output` this is proved nothing although it exited 0, or None.
    `argv`: the check, which when it runs pytest itself runs it once: its first summary is
    pytest's, a later one something else's (code under test printing at exit)."""
    output = without_escapes(output)
    unittest = _unittest_runs(output)
    if unittest and not any(unittest):
        return "unittest ran no test that passed (none found, or each skipped)"
    pytest = _pytest_runs(output) or _progress_runs(output)
    if argv is not None and pytest_args(argv) is not None:
        pytest = pytest[:1]
    if pytest and not any(pytest):
        return "pytest ran no test that passed (each skipped or expected to fail, or none run)"
    return None


def _unittest_runs(output: str) -> list[bool]:
    """For each unittest run in `output`: whether one of its tests passed."""
    runs = []
    for match in _UNITTEST_RAN.finditer(output):
        ran, details = int(match.group(1)), match.group(2) or ""
        runs.append(ran > sum(_counts(details, "=").values()))
    return runs


def _pytest_runs(output: str) -> list[bool]:
    """For each pytest summary in `output`: whether a test of that run passed."""
    runs = []
    for match in _PYTEST_SUMMARY.finditer(output):
        counts = _counts(match.group(1), " ")
        kinds = {kind.removeprefix("subtests ") for kind in counts}
        if kinds <= _PYTEST_KINDS:  # "no tests ran" counts nothing
            runs.append(any(kind.endswith("passed") for kind in counts))
    return runs


def _progress_runs(output: str) -> list[bool]:
    """For each pytest run whose progress `output` shows (a `-qq` in the repository's own
    settings prints no summary): whether a test of that run passed."""
    runs, passed = [], False
    for match in _PYTEST_PROGRESS.finditer(output):
        passed = passed or "." in match.group(1) or "X" in match.group(1)
        if match.group(2) == "100":
            runs.append(passed)
            passed = False
    return runs


def _counts(text: str, separator: str) -> dict[str, int]:
    """`1 skipped, 2 xfailed` (or `skipped=1, expected failures=2`) as {kind: number}, the
    kinds that count a test that did not pass only."""
    found: dict[str, int] = {}
    for part in text.split(","):
        left, _, right = part.strip().partition(separator)
        number, kind = (left, right) if separator == " " else (right, left)
        if number.strip().isdigit():
            found[kind.strip()] = int(number)
    if separator == "=":
        return {kind: n for kind, n in found.items() if kind in _NOT_A_PASS}
    return found


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
