"""Loop detection: the same tool call with the same result, again and again, within one attempt.

A call is the tool's name and its arguments as canonical JSON (keys sorted). A `run` command is
compared by its program and the set of its other words, so `pytest -x -q` repeats `pytest -q -x`;
its result by exit status and output, without the echoed command line. Durations and memory
addresses are masked, since they differ between two runs of the same failing command.

The third identical call in a row gets a notice instead of its result; the fifth ends the
attempt. A repeat never adds a second copy of its result to working memory: one copy is kept.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass

from agent_cli.core import strictjson

WARN_AT = 3
STOP_AT = 5
_NOISE = re.compile(r"\b\d+(?:\.\d+)?\s*(?:ms|s|sec|secs|seconds)\b|0x[0-9a-fA-F]+")


def canonical_command(cmd: str) -> str:
    """A command's program followed by its other words sorted, whitespace normalised."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    if not words:
        return ""
    return " ".join([words[0], *sorted(words[1:])])


def call_key(name: str, arguments: str) -> str:
    """The call as canonical text: name and sorted-key JSON (the command canonicalised)."""
    try:
        args = strictjson.loads(arguments or "{}")
    except ValueError:  # broken, too deep or not finite: compared as the text it is
        return f"{name} {arguments.strip()}"
    if name == "run" and isinstance(args, dict) and isinstance(args.get("cmd"), str):
        args = {**args, "cmd": canonical_command(args["cmd"])}
    return f"{name} {json.dumps(args, sort_keys=True, ensure_ascii=False)}"


def result_key(name: str, ok: bool, text: str) -> str:
    """A digest of what the call produced, without its volatile parts."""
    if name == "run" and text.startswith("$ "):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    masked = _NOISE.sub("#", text)
    return hashlib.blake2b(f"{ok}\0{masked}".encode(), digest_size=16).hexdigest()


@dataclass
class LoopGuard:
    """Counts identical calls with identical results in a row (one guard per attempt)."""

    key: str = ""
    repeats: int = 0

    def observe(self, name: str, arguments: str, ok: bool, text: str) -> int:
        """Record one call and its result; returns how many identical ones in a row, this included."""
        key = f"{call_key(name, arguments)}\0{result_key(name, ok, text)}"
        self.repeats = self.repeats + 1 if key == self.key else 1
        self.key = key
        return self.repeats


def notice(name: str, repeats: int) -> str:
    """What the model reads instead of a repeated result."""
    return (
        f"You have made this same {name} call {repeats} times in a row and got the same "
        f"result each time; it is not shown again. Repeating it will not change it: try "
        f"another approach (read the error, inspect the files, change the code or the "
        f"command). At {STOP_AT} repeats in a row the attempt ends as failed."
    )
