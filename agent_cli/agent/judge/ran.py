"""Whether a check that exited 0 ran a test that passed, by what its test runner printed.

A test run can exit 0 without proving anything: unittest before Python 3.12 exits 0 when it
finds no test (`Ran 0 tests`), and both pytest and unittest exit 0 when every test they ran
was skipped or expected to fail (`3 skipped in 0.01s`, `OK (skipped=3)`), as a task that
marks the failing test `skip` or `xfail` leaves it. Such a check does not pass. The runner's
own summary lines are read (at the start of a line, colours aside); output with none is not
judged here, and a command that runs the runner more than once proves nothing only when
every run passed none.
"""

from __future__ import annotations

import re

# unittest's summary: "Ran 3 tests in 0.001s", a blank line, then "OK (skipped=3)" when it passed
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [^\n]*\n\s*(?:OK(?: \(([^)\n]*)\))?)?", re.M)
# pytest's last line: "==== 1 skipped, 1 xfailed in 0.02s ====" ("1 skipped in 0.02s" with -q)
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ [a-z ]+, )*\d+ [a-z ]+) in \d+(?:\.\d+)?s\b[^\n]*$", re.M
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NOT_A_PASS = ("skipped", "xfailed", "expected failures")  # a test that ran and proved nothing


def no_test_passed(output: str) -> str | None:
    """Why a check whose `output` this is proved nothing although it exited 0, or None."""
    output = _ANSI.sub("", output)
    unittest = _unittest_runs(output)
    if unittest and not any(unittest):
        return "unittest ran no test that passed (none found, or each skipped)"
    pytest = _pytest_runs(output)
    if pytest and not any(pytest):
        return "pytest ran no test that passed (each skipped or expected to fail)"
    return None


def _unittest_runs(output: str) -> list[bool]:
    """For each unittest run in `output`: whether one of its tests passed."""
    runs = []
    for match in _UNITTEST_RAN.finditer(output):
        ran, details = int(match.group(1)), match.group(2) or ""
        runs.append(ran > sum(_counts(details, "=").values()))
    return runs


def _pytest_runs(output: str) -> list[bool]:
    """For each pytest summary in `output` that reports a skipped or expected failure: whether
    a test of that run passed (other summaries are left to the exit code)."""
    runs = []
    for match in _PYTEST_SUMMARY.finditer(output):
        counts = _counts(match.group(1), " ")
        if any(kind in counts for kind in _NOT_A_PASS):
            runs.append(any(kind.endswith("passed") for kind in counts))
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
