"""Keep a whole request within the model's context window, less the tokens kept for the answer.

A request is counted as its JSON (every message and the tools schema), which counts a few
more tokens than the model will (quotes, keys, escapes), so the limit holds with room to
spare. When it is over, the shrinkable parts are cut, the most volatile first: working
memory, then the request's own material (a file list, a diff), the previous exchange's
tool results, recalled memory, the run's state, an attempt's brief (from its end: the plan
before the hints, the hints before the task), the repository's instructions. The system
prompt and the last message (the task block, or for a step the line naming its task, and the
goal) are never cut; if they alone do not fit, that is an error naming the window.

Every request the harness sends goes through `send`, the one place `chat` is called: it fits
the messages (a `Request` was cut part by part already; any message list is cut here, the
echoed tool-call arguments first, then the longest message other than the system prompt and
the goal) to the smaller of the caller's window and the one the model says it is served with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, TypeVar

from agent_cli.core import fences, tokens
from agent_cli.core.errors import AgentError, ContextOverflow
from agent_cli.core.models import ChatReply
from agent_cli.core.protocols import ChatModel, Message
from agent_cli.core.text import readable_all
from agent_cli.llm.server.info import fit_window

Tools = list[dict[str, Any]]


class Parts(Protocol):
    """A request's parts (`ask.request.Request`, a dataclass): laid out, and cut one by one."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    exchange: list[Message]

    def messages(self) -> list[Message]: ...


R = TypeVar("R", bound=Parts)

SHRINK_ORDER = ("memory", "context", "exchange", "recalled", "state", "brief", "instructions")
NOTE = "\n[… cut to fit the model's context window]"
MIN_KEEP = 16
ECHO_MAX_CHARS = 2000  # an echoed argument value longer than this is always sent as a stub
STUB_CHARS = 200  # and one longer than this when the request does not fit
WRITTEN = ("write_file", "edit_file")  # whose long values are the file's new text


@dataclass(frozen=True)
class Window:
    """How many tokens a request may take: the context window less the reserved answer."""

    context_window: int = 128_000
    reserved_output_tokens: int = 4096

    @property
    def limit(self) -> int:
        return self.context_window - self.reserved_output_tokens


def request_tokens(messages: list[Message], tools: Tools | None) -> int:
    """Tokens of a request as JSON: its messages and its tools schema."""
    text = json.dumps(messages, ensure_ascii=False)
    if tools:
        text += json.dumps(tools, ensure_ascii=False)
    return tokens.count(text)


def _upper_bound(messages: list[Message], tools: Tools | None) -> int:
    """A cheap bound: a token is at least one byte."""
    size = len(json.dumps(messages, ensure_ascii=False).encode())
    return size + (len(json.dumps(tools, ensure_ascii=False).encode()) if tools else 0)


def fit(request: R, tools: Tools | None, window: Window | None) -> list[Message]:
    """The request's messages, its parts cut (most volatile first) until it fits `window`."""
    messages = request.messages()
    if window is None or _upper_bound(messages, tools) <= window.limit:
        return messages
    total = request_tokens(messages, tools)
    for part in SHRINK_ORDER:
        while total > window.limit:
            smaller = _shrink(request, part, total - window.limit)
            if smaller == request:
                break  # nothing left to cut in this part
            request, messages = smaller, smaller.messages()
            total = request_tokens(messages, tools)
    if total <= window.limit:
        return messages
    raise _too_big(total, window, messages)


def _too_big(total: int, window: Window, messages: list[Message]) -> AgentError:
    """The error for a request whose uncut parts alone do not fit; when the last message (the
    task and the goal, never cut) is most of it, the fix named is a shorter goal."""
    last = messages[-1].get("content") if messages else None
    goal = tokens.count(last) if isinstance(last, str) else 0
    if goal * 2 > window.limit:
        return AgentError(
            f"the goal and its task take {goal} tokens, and a request may take "
            f"{window.limit} in this model's context window ({window.context_window} less "
            f"{window.reserved_output_tokens} kept for the answer)",
            "give a shorter goal (put long material in a file in the repository and name it), "
            "or use a model with a larger window",
        )
    return AgentError(
        f"the request needs {total} tokens even with memory and context cut, but "
        f"the context window leaves {window.limit} ({window.context_window} less "
        f"{window.reserved_output_tokens} kept for the answer)",
        "raise context_window (or lower reserved_output_tokens) to what the "
        "model serves, or use a model with a larger window",
    )


def _shrink(request: R, part: str, excess: int) -> R:
    """`request` with `part` shorter by at least `excess` tokens (or emptied). The memory block
    is assembled again within fewer tokens when the request can (`memory_within`): whole items
    are left out, the weakest first, rather than its newest items cut from its end; its text
    is cut once that leaves nothing more out."""
    if part == "exchange":
        return replace(request, exchange=_shrink_exchange(request.exchange, excess))
    text: str = getattr(request, part)
    if not text:
        return request
    within: Callable[[int], str] | None = getattr(request, "memory_within", None)
    if part == "memory" and within is not None:
        size = tokens.count(text)
        smaller = within(max(0, size - excess))
        if tokens.count(smaller) < size:
            return replace(request, **{part: smaller})
    cut: dict[str, Any] = {part: cut_text(text, tokens.count(text) - excess - MIN_KEEP)}
    return replace(request, **cut)


def cut_text(text: str, keep: int) -> str:
    """`text` cut to about `keep` tokens (its head), a fence left open closed, the cut said."""
    if keep <= MIN_KEEP:
        return ""
    return fences.close_cut(tokens.truncate(text, keep)) + NOTE


def _shrink_exchange(exchange: list[Message], excess: int) -> list[Message]:
    """The exchange with its tool results cut, the longest first."""
    out = [dict(m) for m in exchange]
    results = sorted(
        (i for i, m in enumerate(out) if m.get("role") == "tool"),
        key=lambda i: -len(out[i].get("content") or ""),
    )
    for i in results:
        if excess <= 0:
            break
        content = out[i].get("content") or ""
        have = tokens.count(content)
        out[i]["content"] = cut_text(content, have - excess - MIN_KEEP) or NOTE.strip()
        excess -= have - tokens.count(out[i]["content"])
    return out


def stub_arguments(name: str, arguments: str, max_chars: int = ECHO_MAX_CHARS) -> str:
    """Echoed tool-call arguments with every value over `max_chars` replaced by a stub that
    says its size, still a JSON object: `{"path": "a.py", "content": "[12,345 characters,
    written]"}`; arguments that are no JSON object become one such stub."""
    if len(arguments) <= max_chars:
        return arguments
    how = "written" if name in WRITTEN else "cut"
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        return json.dumps({"arguments": f"[{len(arguments):,} characters, cut]"})
    out: dict[str, Any] = {}
    for key, value in data.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        key = key if len(key) <= STUB_CHARS else key[:STUB_CHARS] + "…"
        out[key] = f"[{len(text):,} characters, {how}]" if len(text) > max_chars else value
    stubbed = json.dumps(out, ensure_ascii=False)
    if len(stubbed) > max_chars * 2:  # a great many keys
        return json.dumps({"arguments": f"[{len(arguments):,} characters, cut]"})
    return stubbed


def replaced(arguments: str) -> str:
    """A done edit's echoed arguments with its old text as a stub that says its size,
    `{"path": "a.py", "old": "[1,040 characters, replaced]", "new": ...}`: that text is no
    longer the file's, so it is not sent again; arguments of another form are left as they are."""
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    if not isinstance(data, dict) or not isinstance(data.get("old"), str):
        return arguments
    data["old"] = f"[{len(data['old']):,} characters, replaced]"
    return json.dumps(data, ensure_ascii=False)


def _stubbed(message: Message, max_chars: int) -> Message:
    """`message` with its tool calls' arguments (if any) stubbed beyond `max_chars`."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    out = []
    for call in calls:
        fn = call.get("function") or {}
        name, args = str(fn.get("name", "")), str(fn.get("arguments", ""))
        out.append({**call, "function": {**fn, "arguments": stub_arguments(name, args, max_chars)}})
    return {**message, "tool_calls": out}


def fit_messages(
    messages: list[Message], tools: Tools | None, window: Window | None
) -> list[Message]:
    """Any request's messages cut to fit `window`: echoed arguments stubbed first, then the
    longest message cut, never the system prompt (the first) nor the goal (the last)."""
    if window is None or _upper_bound(messages, tools) <= window.limit:
        return messages
    total = request_tokens(messages, tools)
    if total <= window.limit:
        return messages
    out = [_stubbed(m, STUB_CHARS) for m in messages]
    total = request_tokens(out, tools)
    while total > window.limit:
        cuttable = [
            i
            for i in range(1, len(out) - 1)
            if isinstance(out[i].get("content"), str) and out[i]["content"] != NOTE.strip()
        ]
        if not cuttable:
            break
        i = max(cuttable, key=lambda i: len(out[i]["content"]))
        content = out[i]["content"]
        keep = tokens.count(content) - (total - window.limit) - MIN_KEEP
        out[i] = {**out[i], "content": cut_text(content, keep) or NOTE.strip()}
        total = request_tokens(out, tools)
    if total <= window.limit:
        return out
    raise _too_big(total, window, out)


def served(model: ChatModel) -> Window | None:
    """The window the model says it is served with, a quarter of it kept for the answer (as
    the client caps a reply); None when it does not say."""
    size = getattr(model, "context_window", None)
    if not isinstance(size, int) or size <= 0:
        return None
    return Window(size, min(4096, size // 4))


def narrowest(window: Window | None, model: ChatModel) -> Window | None:
    """The smaller of `window` and the one `model` says it is served with: what a request is
    fitted to (None when neither is known)."""
    known = [w for w in (window, served(model)) if w is not None]
    return min(known, key=lambda w: w.limit) if known else None


def narrowed(window: Window, model: ChatModel, memory: int, tool_output: int) -> tuple[int, int]:
    """Working memory's budget and the tool output cap (`memory` and `tool_output` now, made
    for `window`, the run's) fitted as the run's start fits them (`fit_window`) to the window
    requests are fitted to now (`narrowest`): smaller once a probe that answered late, or an
    overflow error, showed the model's window smaller; never larger."""
    size = (narrowest(window, model) or window).context_window
    memory, tool_output, _ = fit_window(size, memory, tool_output, window.reserved_output_tokens)
    return memory, tool_output


def send(
    model: ChatModel,
    messages: list[Message],
    tools: Tools | None,
    choice: str | dict[str, Any] | None,
    *,
    window: Window | None = None,
    log: Callable[[dict[str, Any]], None] | None = None,
    again: bool = False,
) -> ChatReply:
    """Fit `messages` to the smaller of `window` and the model's own, log them, ask `model`.
    Their text is sent `readable`: a file name git gave that is not UTF-8 (a diff, a check's
    reason naming an ignored file) as `\\xNN`, which a request can carry.

    With `again`, a request the server still finds too long (its window was not known) is cut
    to the window the error names (else to three quarters) and asked once more."""
    messages = readable_all(messages)
    within = narrowest(window, model)
    note = log or _unlogged
    fitted = fit_messages(messages, tools, within)
    note({"type": "request", "messages": fitted})
    try:
        return model.chat(fitted, tools, choice)
    except ContextOverflow as e:
        if not again:
            raise
        within = after_overflow(within or Window(), e)
    fitted = fit_messages(messages, tools, within)
    note({"type": "request", "messages": fitted})
    return model.chat(fitted, tools, choice)


def after_overflow(window: Window, overflow: ContextOverflow) -> Window:
    """The window to fit to after `overflow`: the server's, when it said, else a quarter less."""
    size = window.context_window * 3 // 4
    if overflow.window and overflow.window < window.context_window:
        size = overflow.window
    return Window(size, min(window.reserved_output_tokens, size // 4))


def _unlogged(record: dict[str, Any]) -> None:
    """Where records go when the caller keeps no trajectory."""
