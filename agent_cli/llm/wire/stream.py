"""Assemble a streamed chat completion (server-sent events) into the body a whole reply has.

Text deltas are handed to `on_text` as they arrive; tool-call arguments are joined per
call: by its `index` (where a new id is a new call too: servers that give every call index
0), or, from a server that sends none, by its `id` (a new id is a new call, and so are
arguments that begin after the call's were whole JSON: one id for every call).
A name repeated whole in every piece is taken once. An event's data may span several `data:`
lines, joined as server-sent events are. A stream that ends before `data: [DONE]` and before
any `finish_reason`, or in the middle of a chunk, was cut: `StreamCut`, which the client
retries like a dropped connection (and, when it ended in good order twice, asks for whole).
Words that are no JSON at all in place of a chunk are the server's (or a proxy's) failure:
`StreamFailed`, retried as an error event is.
`paced` reads the lines off the raw bytes and bounds a stream's progress at every chunk that
arrives: keep-alive comments alone, or bytes that never end a line, do not keep a request
going.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agent_cli.core.errors import MalformedReply
from agent_cli.llm.wire.body import NOT_A_COMPLETION, error_object, load_body, message_text


class StreamCut(Exception):
    """The stream ended (or broke) before the reply was complete."""

    def __init__(self, message: str, unfinished: bool = False) -> None:
        super().__init__(message)
        self.unfinished = unfinished  # ended in good order, only never said it was over


class StreamFailed(Exception):
    """The server (or a proxy) wrote its own words inside the stream in place of a chunk."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StreamStalled(Exception):
    """The stream went on without reply data for too long, or past its whole-reply bound."""

    def __init__(self, message: str, whole: bool) -> None:
        super().__init__(message)
        self.whole = whole  # the bound on the whole reply, not on the silence between data


_EOL = re.compile(rb"\r\n|\r|\n")


def paced(
    chunks: Iterable[bytes],
    silence_s: float,
    total_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[str]:
    """The lines of an event stream read from its raw `chunks` (ended by CRLF, LF or CR), or
    StreamStalled once `silence_s` passed with no reply data (keep-alive comments and blank
    lines do not count) or the stream ran past `total_s`. Both are checked at every chunk that
    arrives, so bytes that never end a line cannot keep a request going."""
    started = last_data = clock()
    pending = bytearray()
    for chunk in chunks:
        now = clock()
        lines: list[bytes] = []
        if _EOL.search(chunk) or pending.endswith(b"\r"):
            pending += chunk
            held = 1 if pending.endswith(b"\r") else 0  # maybe the first half of a CRLF
            *lines, rest = _EOL.split(bytes(pending[: len(pending) - held]))
            pending = bytearray(rest + b"\r" * held)
        else:
            pending += chunk
        if any(line.startswith(b"data:") for line in lines) or pending.startswith(b"data:"):
            last_data = now
        elif now - last_data > silence_s:
            raise StreamStalled(
                f"only keep-alive comments and no reply data for {silence_s:g} s", whole=False
            )
        if now - started > total_s:
            raise StreamStalled(f"the reply went on for over {total_s:g} s", whole=True)
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if pending.rstrip(b"\r"):
        yield bytes(pending.rstrip(b"\r")).decode("utf-8", errors="replace")


class StreamAssembler:
    """Collects the chunks of one streamed reply."""

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self.on_text = on_text
        self.text: list[str] = []
        self.calls: list[dict[str, Any]] = []  # in the order they began
        self._slots: dict[tuple[Any, ...], dict[str, Any]] = {}  # by index, or by id without one
        self._by_index: dict[int, tuple[Any, ...]] = {}  # the call an index goes to now
        self._last: tuple[Any, ...] | None = None  # the call of the last piece without an index
        self._last_id: str | None = None  # the last id such a piece named
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.timings: dict[str, Any] | None = None
        self.done = False
        self.chose = False  # whether any chunk carried the reply's choice
        self.chunks = 0
        self._data: list[str] = []  # the `data:` lines of the event being read

    def feed(self, line: str) -> None:
        """Take one line of the event stream: the `data:` lines of an event are joined (with a
        newline, as server-sent events are) and the event is read at the blank line after it."""
        if line.startswith("data:"):
            value = line[5:].removeprefix(" ")
            if value.strip() == "[DONE]" and not self._data:
                self.done = True  # the end: not waited on past its own line
            else:
                self._data.append(value)
        elif not line:
            self.end_event()
        # anything else: `event:` names, `id:`, `:` keep-alive comments

    def end_event(self) -> None:
        """Read the event whose `data:` lines came since the last one (at a blank line, or where
        the stream ended)."""
        lines, self._data = self._data, []
        if not lines:
            return
        try:
            self._event("\n".join(lines))
        except MalformedReply:
            if len(lines) == 1:
                raise
            # A server that leaves out the blank lines between events: each line is one.
            for data in lines:
                self._event(data)

    def _event(self, data: str) -> None:
        data = data.strip()
        if data == "[DONE]":
            self.done = True
            return
        if data[:1] not in ("{", "["):  # no JSON at all: the server's (or a proxy's) own words
            raise StreamFailed(f"it sent {data[:200]!r} in place of a chunk")
        chunk = load_body(data, "a chunk of the streamed reply")
        if not isinstance(chunk, dict):
            raise MalformedReply(
                "a chunk of the streamed reply is not a JSON object", NOT_A_COMPLETION
            )
        self.chunks += 1
        try:
            self._chunk(chunk)
        except (AttributeError, TypeError) as e:  # a field of the wrong shape
            raise MalformedReply(
                f"a chunk of the streamed reply is not a completion chunk ({e})", NOT_A_COMPLETION
            ) from None

    def _chunk(self, chunk: dict[str, Any]) -> None:
        if chunk.get("error"):  # retried as a whole reply's error object, by its code
            raise error_object(chunk["error"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            self.timings = chunk["timings"]
        for choice in chunk.get("choices") or []:
            # the first choice: index 0, or none given (null, or digits sent as text count too)
            if not isinstance(choice, dict) or _index(choice.get("index")) not in (0, None):
                continue
            self.chose = True
            self._delta(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def _delta(self, delta: dict[str, Any]) -> None:
        text = message_text(delta.get("content"))
        if text:
            self.text.append(text)
            if self.on_text:
                self.on_text(text)
        for n, part in enumerate(delta.get("tool_calls") or []):
            call = self._call(part, n)
            call["id"] = part.get("id") or call["id"]
            fn = part.get("function") or {}
            name = fn.get("name")
            if isinstance(name, str) and name:
                # Some servers repeat the whole name (or the name so far) in every piece.
                call["name"] = name if name.startswith(call["name"]) else call["name"] + name
            args = fn.get("arguments")
            if args is not None:
                call["arguments"].append(args if isinstance(args, str) else json.dumps(args))

    def _call(self, part: dict[str, Any], n: int) -> dict[str, Any]:
        """The call a piece belongs to: by its `index`, where another `id` than the call's
        begins a new call (servers that give every call index 0); without one, by its `id` (a
        new id is a new call), else the call the last piece without an index went to, else by
        its place in the delta; an index that is no number (null, text) counts as none.
        Without an index, a piece that begins a call after the last one's arguments were
        already whole JSON is a new call even under the same id (servers that give every call
        one id)."""
        index, ident = _index(part.get("index")), part.get("id")
        if index is not None:
            key: tuple[Any, ...] = self._by_index.get(index, ("index", index))
            slot = self._slots.get(key)
            if slot and slot["id"] and isinstance(ident, str) and ident and ident != slot["id"]:
                key = ("begun", len(self.calls))  # another call under an index already used
            self._by_index[index] = key
        else:
            if isinstance(ident, str) and ident and ident != self._last_id:
                self._last = ("id", ident)
                self._last_id = ident
            key = self._last or ("index", n)
            if key in self._slots and _begins_another(self._slots[key], part):
                key = self._last = ("begun", len(self.calls))
        if key not in self._slots:
            self._slots[key] = {"id": None, "name": "", "arguments": []}
            self.calls.append(self._slots[key])
        return self._slots[key]

    def complete(self) -> bool:
        """Whether the stream said it was over."""
        return self.done or self.finish_reason is not None

    def body(self) -> dict[str, Any]:
        """The assembled reply in the shape of a whole (non-streamed) chat completion."""
        if not self.complete():
            raise StreamCut(
                f"the streamed reply stopped after {self.chunks} chunks, unfinished",
                unfinished=True,
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.text) if self.text else None,
        }
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c["id"] or f"call_{i}",
                    "type": "function",
                    "function": {"name": c["name"], "arguments": "".join(c["arguments"])},
                }
                for i, c in enumerate(self.calls)
            ]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        # A stream whose chunks carried no choice is a reply with no choices, as a whole one.
        body: dict[str, Any] = {"choices": [choice] if self.chose else []}
        if self.usage:
            body["usage"] = self.usage
        if self.timings:
            body["timings"] = self.timings
        return body


def _begins_another(call: dict[str, Any], part: dict[str, Any]) -> bool:
    """Whether `part`, with no index, begins a call after `call` rather than goes on with it:
    `call`'s arguments are already whole JSON and the part brings arguments of its own, or
    another name (a name repeated with nothing after it is the same call's)."""
    fn = part.get("function") or {}
    args, name = fn.get("arguments"), fn.get("name")
    brings_args = isinstance(args, dict) or (isinstance(args, str) and bool(args.strip()))
    other_name = isinstance(name, str) and bool(name) and name != call["name"]
    if not (brings_args or other_name) or not call["name"]:
        return False
    try:
        json.loads("".join(call["arguments"]))
    except ValueError:
        return False
    return True


def _index(value: Any) -> int | None:
    """A tool call's `index`: an int, or digits sent as text; None for anything else."""
    if isinstance(value, str) and value.isdecimal() and len(value) < 10:
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def assemble(
    lines: Iterable[str],
    on_text: Callable[[str], None] | None = None,
    acc: StreamAssembler | None = None,
) -> dict[str, Any]:
    """Read an event stream to its end; the assembled completion body. `acc` (a new one when
    None) keeps what was read when reading fails, so the caller can see how far it got."""
    acc = acc or StreamAssembler(on_text)
    for line in lines:
        acc.feed(line)
        if acc.done:
            break
    else:
        try:
            acc.end_event()  # a last event with no blank line after it
        except MalformedReply:
            if not acc.complete():  # the body ended in the middle of a chunk: it was cut
                raise StreamCut(
                    f"the streamed reply stopped after {acc.chunks} chunks, in the middle of one"
                ) from None
            # after the reply's end, a broken last chunk (its usage, cut) is not the reply's
    return acc.body()
