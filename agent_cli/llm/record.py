"""Record every model exchange to JSONL, and replay a recording with no network.

A line is `{"request": {"messages", "tools", "tool_choice"}, "reply": ChatReply}`.
Nothing that authenticates is part of a request here, and the text is passed through
`redact` with the configured secrets anyway, so a recording can be shared. A recording is
read as a regular file of at most MAX_BYTES, UTF-8, each line parsed with bounded nesting.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

from agent_cli.core import atomic, strictjson
from agent_cli.core.errors import ConfigError, ModelError, UsageError
from agent_cli.core.models import ChatReply, Usage
from agent_cli.core.redact import redact_all, redact_messages
from agent_cli.llm.base import ChatModel, Message, reply_cost

Tools = list[dict[str, Any]] | None
ToolChoice = str | dict[str, Any] | None
MAX_BYTES = 256 * atomic.MiB


class RecordingModel:
    """Wraps a ChatModel and appends each exchange to a JSONL file."""

    def __init__(self, inner: ChatModel, path: Path, secrets: tuple[str, ...] = ()) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.secrets = secrets
        try:  # said now, not after a request was paid for
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and not self.path.is_file():
                raise IsADirectoryError(errno.EISDIR, "not a regular file")
            with self.path.open("a", encoding="utf-8"):
                pass
        except OSError as e:
            raise UsageError(
                f"--record {self.path} cannot be written: {e.strerror or e}",
                "name a file in a directory you can write to",
            ) from None

    @property
    def usage(self) -> Usage:
        return self.inner.usage

    @property
    def context_window(self) -> int | None:
        """The wrapped model's context window, when it knows one."""
        return self.inner.context_window

    def chat(
        self, messages: list[Message], tools: Tools = None, tool_choice: ToolChoice = None
    ) -> ChatReply:
        """The wrapped model's turn, appended to the recording."""
        reply = self.inner.chat(messages, tools, tool_choice)
        exchange = {
            "request": {
                "messages": redact_messages(messages, self.secrets),
                "tools": tools,
                "tool_choice": tool_choice,
            },
            "reply": reply.model_dump(),
        }
        # redacted before it is serialised, so every line stays valid JSON
        line = json.dumps(redact_all(exchange, self.secrets), ensure_ascii=False)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
        return reply


class ReplayModel:
    """Serves the replies of a recording in order, without any network."""

    def __init__(
        self,
        path: Path,
        *,
        price_in: float = 0.0,
        price_out: float = 0.0,
        price_cached: float | None = None,
        name: str = "replay",
    ) -> None:
        self.path = Path(path)
        self.name = name
        self.usage = Usage()
        self._prices = (price_in, price_out, price_cached)
        self.replies = _load(self.path)
        self.served = 0

    @property
    def context_window(self) -> int | None:
        """Not known: a recording holds replies, not the server that gave them."""
        return None

    def chat(
        self, messages: list[Message], tools: Tools = None, tool_choice: ToolChoice = None
    ) -> ChatReply:
        """The next recorded reply, whatever was asked."""
        if self.served >= len(self.replies):
            raise ModelError(
                f"the recording {self.path} has no reply left ({len(self.replies)} served)",
                "the run asked for more than was recorded; record again",
            )
        reply = self.replies[self.served].model_copy(deep=True)
        self.served += 1
        reply.usage.calls = 1
        reply.usage.cost_usd = reply_cost(reply.usage, self._prices)
        self.usage.add(reply.usage)
        return reply


def _load(path: Path) -> list[ChatReply]:
    hint = "a recording is JSONL written by --record"
    try:
        lines = atomic.read_text(path, MAX_BYTES).splitlines()
    except atomic.UnsafeFile as e:
        raise ConfigError(f"cannot read the recording: {e}", hint) from None
    except OSError as e:
        raise ConfigError(f"cannot read the recording {path}: {e.strerror or e}") from None
    replies: list[ChatReply] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            replies.append(ChatReply.model_validate(strictjson.loads(line)["reply"]))
        except (ValueError, KeyError, TypeError, RecursionError):
            raise ConfigError(f"{path}:{n}: not a recorded exchange", hint) from None
    return replies
