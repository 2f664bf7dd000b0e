"""Structured answers: one forced tool whose arguments are a pydantic model, asked once more
with the validation error when the reply does not fit it.

The tool's JSON schema is the model's own, made plain for servers that compile it into a
grammar (llama.cpp, vLLM): references inlined, no titles, defaults or docstrings. Every request and reply
goes to `log` the way the executor logs its steps. The caller decides what a `Failure` means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from agent_cli.agent.ask.window import Window, send
from agent_cli.core import fences, strictjson
from agent_cli.core.errors import MalformedReply
from agent_cli.core.models import ChatReply
from agent_cli.core.protocols import ChatModel, Message
from agent_cli.llm.base import force

T = TypeVar("T", bound=BaseModel)
Log = Callable[[dict[str, Any]], None]
_BRANCHES = {"str", "none", "int", "bool", "float"}
MAX_ERROR_CHARS = 2000  # a reason can quote what the model sent: it goes back bounded
_NOISE = ("title", "default", "description")  # docstrings are for readers of the code


def schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema with every `$ref` inlined and no titles, defaults or docstrings."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def plain(node: Any) -> Any:
        if isinstance(node, list):
            return [plain(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return plain(defs[node["$ref"].rsplit("/", 1)[-1]])
        # "properties" maps names to schemas: a property may itself be called "title".
        return {
            k: ({n: plain(s) for n, s in v.items()} if k == "properties" else plain(v))
            for k, v in node.items()
            if k not in _NOISE
        }

    out: dict[str, Any] = plain(raw)
    return out


@dataclass(frozen=True)
class Form(Generic[T]):
    """A forced tool and the model its arguments must validate against."""

    name: str
    description: str
    model: type[T]
    noun: str  # what the re-ask calls the answer: "plan", "verdict"

    def tool(self) -> dict[str, Any]:
        """The OpenAI function tool, its parameters generated from the model."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": schema(self.model),
            },
        }


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A valid answer and the number of requests it took."""

    value: T
    requests: int


@dataclass(frozen=True)
class Failure(Generic[T]):
    """No valid answer after the re-ask: the last reason, and the last value `check` refused."""

    error: str
    requests: int
    refused: T | None = None
    cut: bool = False  # the last reply was cut at the length limit: it needs more room


@dataclass(frozen=True)
class Invalid:
    """Why one reply is no valid answer."""

    reason: str
    cut: bool = False  # cut at the length limit: more room for the reply, not a better model


def read(reply: ChatReply, form: Form[T]) -> T | Invalid:
    """The forced tool's arguments in `reply`, validated; the call is picked by its name."""
    calls = [c for c in reply.tool_calls if c.name == form.name]
    if not calls:
        if reply.finish_reason == "length":
            return Invalid(
                f"the reply was cut at the length limit before it called {form.name}", cut=True
            )
        others = sorted({c.name[:64] for c in reply.tool_calls})  # the model's: bounded
        if others:
            return Invalid(f"the reply called {', '.join(others)} instead of {form.name}")
        return Invalid(f"the reply did not call {form.name}")
    try:
        data = strictjson.loads(calls[0].arguments)
    except ValueError as e:
        if reply.finish_reason == "length":
            return Invalid(
                f"the reply was cut at the length limit inside {form.name}'s arguments", cut=True
            )
        return Invalid(f"{form.name} arguments are unusable: {e}")
    try:
        return form.model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if _field(p))
        return Invalid(f"invalid {form.noun} at {where or 'top level'}: {err['msg']}")


def _field(part: int | str) -> bool:
    """Whether a part of an error's location names a field or an index, not a union's branch."""
    return isinstance(part, int) or (part.isidentifier() and part not in _BRANCHES)


def with_error(messages: list[Message], form: Form[T], error: str) -> list[Message]:
    """`messages` with the reason the last answer was refused, just before the goal."""
    ask = list(messages)
    ask.insert(
        -1,
        {
            "role": "user",
            "content": f"Your previous {form.noun} was rejected: "
            f"{fences.escape(error[:MAX_ERROR_CHARS])}. "
            f"Call {form.name} again with a valid {form.noun}.",
        },
    )
    return ask


def ask(
    model: ChatModel,
    messages: list[Message],
    form: Form[T],
    *,
    log: Log | None = None,
    check: Callable[[T], str | None] | None = None,
    window: Window | None = None,
) -> Answer[T] | Failure[T]:
    """Ask for `form`'s answer, once more with the reason when it is invalid or `check` says
    what is wrong with it (None: nothing). Each request is fitted to `window` and to the
    model's own (`window.send`). Errors other than a malformed reply propagate."""
    error, refused, cut = "", None, False
    for n in (1, 2):
        request = with_error(messages, form, error) if error else messages
        note = log or _unlogged
        try:
            reply = send(
                model, request, [form.tool()], force(form.name), window=window, log=note, again=True
            )
        except MalformedReply as e:
            note({"type": "reply", "error": e.message})
            error, refused = e.message, None
            continue
        note({"type": "reply", "reply": reply.model_dump()})
        got = read(reply, form)
        cut = isinstance(got, Invalid) and got.cut
        if isinstance(got, Invalid):
            error, refused = got.reason, None
            continue
        problem = check(got) if check else None
        if problem is None:
            return Answer(got, n)
        error, refused = problem, got
    return Failure(error, 2, refused, cut)


def _unlogged(record: dict[str, Any]) -> None:
    """Where records go when the caller keeps no trajectory."""
