"""The goals of a batch file: TOML `[[goals]]` tables, or JSON lines, one goal each, checked.

Each goal's acceptance commands are checked as `--accept` checks a run's before anything
starts (`acceptance.problem`), as far as the repository's state does not decide it: a shell
operator, a command that cannot fail, one that runs no test. Whether the program exists is
left to each run, which looks in its own worktree.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from agent_cli.agent.judge import acceptance
from agent_cli.core import strictjson
from agent_cli.core.errors import UsageError
from agent_cli.core.text import blank, unusable

TOML_SUFFIXES = (".toml",)
# Each goal and acceptance command is one argument of its run's command line, which the
# kernel bounds (128 KiB an argument, and the whole line with the environment).
MAX_FIELD_BYTES = 32_000
# A goal and all its acceptance commands together: the system bounds the whole command line
# (with the environment) too, and a run it cannot start is a goal that fails.
MAX_GOAL_BYTES = 128_000
# The whole file, read at most this far: a device that never ends (/dev/zero) is no goals file.
MAX_FILE_BYTES = 16 * 1024 * 1024
REFUSED = "acceptance_command"  # what `--accept` would refuse
TOO_LONG = "command_line"  # a goal and its commands too long for one command line
_HINTS = {
    REFUSED: "",  # its message says what to give instead
    TOO_LONG: "put long checks in a script, and give the command that runs it",
}
_EXAMPLE = '[[goals]]\ngoal = "Add a median function"\naccept = ["pytest -q"]'


class Goal(BaseModel):
    """One goal of a batch: what `agent run` is given for it."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    goal: str
    accept: tuple[str, ...] = ()  # like repeated --accept
    max_steps: StrictInt | None = Field(None, ge=1)  # strict: `true` is no number
    budget_usd: StrictFloat | None = Field(None, ge=0)

    @field_validator("goal")
    @classmethod
    def _said(cls, goal: str) -> str:
        if blank(goal):
            raise ValueError("the goal is empty")
        why = unusable(goal) or _too_long(goal)
        if why:
            raise ValueError(f"the goal {why}")
        return goal

    @field_validator("accept")
    @classmethod
    def _commands(cls, accept: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if any(not cmd.strip() for cmd in accept):
            raise ValueError("an acceptance command is empty")
        why = next((w for cmd in accept if (w := unusable(cmd) or _too_long(cmd))), "")
        if why:
            raise ValueError(f"an acceptance command {why}")
        goal = info.data.get("goal", "")
        size = sum(len(text.encode("utf-8")) for text in (goal, *accept))
        if size > MAX_GOAL_BYTES:
            raise PydanticCustomError(
                TOO_LONG,
                "the goal and its acceptance commands are {size} bytes together (at most "
                "{most}: they go on one command line)",
                {"size": f"{size:,}", "most": f"{MAX_GOAL_BYTES:,}"},
            )
        root = (info.context or {}).get("root")
        if isinstance(root, Path):
            for cmd in accept:
                refused = acceptance.problem(cmd, root)
                # a missing program may be in the run's worktree, and is checked there
                if refused and not acceptance.missing(cmd, root):
                    raise PydanticCustomError(REFUSED, "{why}", {"why": refused})
        return accept


def _too_long(text: str) -> str:
    size = len(text.encode("utf-8"))
    if size > MAX_FIELD_BYTES:
        return f"is {size:,} bytes long (at most {MAX_FIELD_BYTES:,}: it goes on a command line)"
    return ""


def read_goals(path: Path, root: Path | None = None) -> list[Goal]:
    """The goals in `path` (TOML when it ends in .toml, else JSON lines); a UsageError naming
    the file, the goal and the field when one is wrong. With `root` (the repository), each
    acceptance command is checked as `--accept` would be, as far as no repository state says."""
    try:
        with path.open("rb") as f:  # a pipe (<(…)) is read too, as far as the bound
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(f"it holds more than {MAX_FILE_BYTES:,} bytes")
        text = data.decode("utf-8")
    except (OSError, ValueError) as e:  # UnicodeDecodeError is a ValueError
        raise UsageError(
            f"cannot read the batch file {path}: {getattr(e, 'strerror', None) or e}",
            "give a TOML file of [[goals]] tables or a JSON-lines file",
        ) from None
    raw = _toml(path, text) if path.suffix in TOML_SUFFIXES else _json_lines(path, text)
    if not raw:
        raise UsageError(f"the batch file {path} holds no goal", f"write goals like: {_EXAMPLE}")
    return [_goal(path, where, item, root) for where, item in raw]


def _toml(path: Path, text: str) -> list[tuple[str, Any]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path} is not TOML: {e}", f"write goals like: {_EXAMPLE}") from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise UsageError(f"{path} is not TOML: its values nest too deeply") from None
    unknown = sorted(set(data) - {"goals"})
    if unknown:
        raise UsageError(
            f"{path}: unknown table or key {unknown[0]!r}", "the file holds [[goals]] tables only"
        )
    goals = data.get("goals", [])
    if not isinstance(goals, list):
        raise UsageError(f"{path}: goals must be [[goals]] tables", f"write: {_EXAMPLE}")
    return [(f"goal {n}", item) for n, item in enumerate(goals, 1)]


def _json_lines(path: Path, text: str) -> list[tuple[str, Any]]:
    """The file's lines parsed, each ended by LF or CRLF only: a JSON string may hold the
    other characters `str.splitlines` ends a line at (U+2028 and U+2029, as `JSON.stringify`
    and Python's `ensure_ascii=False` write them; NEL), and a goal holding one is one line."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            out.append((f"line {n}", strictjson.loads(line)))
        except ValueError as e:
            raise UsageError(
                f"{path}: line {n}: {e}",
                'write one JSON object a line: {"goal": "Add a median function"}',
            ) from None
    return out


def _goal(path: Path, where: str, item: Any, root: Path | None = None) -> Goal:
    if not isinstance(item, dict):
        raise UsageError(f"{path}: {where} is not a table of goal, accept, max_steps, budget_usd")
    if isinstance(item.get("accept"), str):
        item = {**item, "accept": [item["accept"]]}
    try:
        return Goal.model_validate(item, context={"root": root})
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "goal"
        hint = _HINTS.get(
            err["type"],
            "each goal takes goal (required), accept (a list of commands), max_steps, budget_usd",
        )
        raise UsageError(
            f"{path}: {where}: {field}: {str(err['msg']).removeprefix('Value error, ')}", hint
        ) from None
