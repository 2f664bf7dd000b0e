"""Failure signatures from pytest output: which tests failed, where, and with what error.

A signature is one line, e.g. `tests/test_x.py::test_y failed at tests/test_x.py:12: ValueError: bad`,
stored in long-term memory so a later run can find what fixed the same failure before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SUMMARY = re.compile(r"^(FAILED|ERROR) (.+?)(?: - (.*))?$")
_VERBOSE = re.compile(r"^(\S+::\S+) (FAILED|ERROR)\b")
_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_FRAME = re.compile(r"^(\S+\.py):(\d+): ")
_NATIVE_FRAME = re.compile(r'^\s*File "(.+?\.py)", line (\d+), in ')
_LIBRARY = re.compile(
    r"(site-packages|dist-packages|/lib/python\d|[\\/]_pytest[\\/]|[\\/]pluggy[\\/])"
)
MAX_SIGNATURE_CHARS = 240


@dataclass(frozen=True)
class Failure:
    """One failing test: its id, the first frame of its traceback in user code, its error."""

    test_id: str
    frame: str = ""
    error: str = ""

    def signature(self) -> str:
        """The failure as one searchable line."""
        text = f"{self.test_id} failed"
        if self.frame:
            text += f" at {self.frame}"
        if self.error:
            text += f": {self.error}"
        return text[:MAX_SIGNATURE_CHARS]


def _summary_ids(lines: list[str]) -> dict[str, str]:
    """Test id -> message from the short summary (or the verbose progress lines)."""
    ids: dict[str, str] = {}
    for line in lines:
        m = _SUMMARY.match(line)
        if m:
            ids.setdefault(m.group(2).strip(), (m.group(3) or "").strip())
            continue
        v = _VERBOSE.match(line)
        if v:
            ids.setdefault(v.group(1), "")
    return ids


def _sections(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(header name, body lines) of each failure or error report."""
    out: list[tuple[str, list[str]]] = []
    for line in lines:
        m = _HEADER.match(line)
        if m and not m.group(1).startswith("_ _"):
            out.append((m.group(1), []))
        elif line.startswith("=") and out:
            out.append(("", []))  # a "==== ... ====" banner ends the current report
        elif out:
            out[-1][1].append(line)
    return [(name, body) for name, body in out if name]


def _first_frame(body: list[str]) -> str:
    """`path:line` of the first traceback frame outside libraries and the interpreter."""
    for line in body:
        m = _FRAME.match(line) or _NATIVE_FRAME.match(line)
        if m and not _LIBRARY.search(m.group(1)):
            return f"{m.group(1)}:{m.group(2)}"
    return ""


def _first_error(body: list[str]) -> str:
    """The first `E   ...` line of a report, without the marker."""
    for line in body:
        if line.startswith("E ") and line[1:].strip():
            return line[1:].strip()
    return ""


def _dotted_to_id(name: str) -> str:
    """`TestK.test_m[1.5]` -> `TestK::test_m[1.5]`: dots outside the parameter brackets only."""
    head, bracket, rest = name.partition("[")
    return head.replace(".", "::") + bracket + rest


def _match_id(name: str, ids: dict[str, str]) -> str | None:
    """The summary id that a report header names, if any."""
    if name.startswith("ERROR collecting "):
        target = name.removeprefix("ERROR collecting ").strip()
        return next((i for i in ids if i == target or i.endswith("/" + target)), target)
    name = re.sub(r"^ERROR at (setup|teardown) of ", "", name)
    suffix = "::" + _dotted_to_id(name)
    return next((i for i in ids if i.endswith(suffix)), None)


def parse_pytest(output: str) -> list[Failure]:
    """Every failing or erroring test in `output`, in the order pytest reported them."""
    lines = output.splitlines()
    ids = _summary_ids(lines)
    found: dict[str, Failure] = {}
    for name, body in _sections(lines):
        frame, error = _first_frame(body), _first_error(body)
        test_id = _match_id(name, ids)
        if test_id is None:
            path = frame.rsplit(":", 1)[0] if frame else "?"
            test_id = f"{path}::{_dotted_to_id(name)}"
        found.setdefault(test_id, Failure(test_id, frame, error or ids.get(test_id, "")))
    ordered = [found.pop(i) if i in found else Failure(i, "", msg) for i, msg in ids.items()]
    return ordered + list(found.values())


def failure_signatures(output: str) -> list[str]:
    """The one-line signature of each failure in pytest `output`."""
    return [f.signature() for f in parse_pytest(output)]


_SIGNATURE = re.compile(r"^(\S+) failed(?: at \S+:\d+)?(?:: (.*))?$")


def signature_key(signature: str) -> str:
    """What makes two failures the same: the test id and the kind of error.

    The frame's line number and the message are left out: a fix moves lines, and messages
    carry values (`assert 3 == 2.5`) that differ from one run to the next.
    """
    m = _SIGNATURE.match(signature.strip())
    if not m:
        return signature.strip()
    error = (m.group(2) or "").strip()
    kind = re.split(r"[:\s(]", error, maxsplit=1)[0] if error else ""
    return f"{m.group(1)} {kind}".strip()
