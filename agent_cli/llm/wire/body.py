"""Reading what a Chat Completions server sends: the completion body, its usage.

Bodies are parsed strictly (`agent_cli.core.strictjson`): `NaN`, `Infinity`, numbers that
overflow, huge integers and deep nesting make the reply a `MalformedReply`, never an
internal error later on. A token count in `usage` is believed up to `MAX_COUNT`; one that is
not a number (text, a list) counts as 0, since odd usage costs its numbers, not the reply.
A tool call's id is made unique within its reply (a repeated one gets a suffix), since each
tool result is paired with its call by id. Tool-call arguments are passed on as the text the
model wrote:
the tool that receives them parses them the same strict way and tells the model what was
wrong with that one call.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from agent_cli.core import strictjson
from agent_cli.core.errors import MalformedReply
from agent_cli.core.models import ChatReply, ToolCall, Usage

NOT_A_COMPLETION = "check that --base-url points at a Chat Completions API"
BUSY_CODES = (429, 502, 503, 504)  # and any code from 500 up (`retryable`)
# The HTTP status an error object's word stands for, its `code` before its `type`: OpenAI's
# codes and types, and Anthropic's types, which gateways pass on as they are.
STATUS_OF = {
    "invalid_api_key": 401,
    "authentication_error": 401,
    "permission_error": 403,
    "model_not_found": 404,
    "not_found_error": 404,
    "context_length_exceeded": 400,
    "invalid_request_error": 400,
    "insufficient_quota": 429,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "server_error": 500,
    "api_error": 500,
    "overloaded_error": 529,
}
OVERFLOW_CODE = "context_length_exceeded"
QUOTA_CODE = "insufficient_quota"
# Words that say an account's quota or credit is spent ("quota exceeded", "insufficient
# credits", "credit balance is too low"), which no wait cures ...
_SPENT = re.compile(
    r"\b(quota|credits?|balance)\b.{0,40}\b(exceeded|exhausted|used up|spent|too low|"
    r"reached|depleted|run out)\b|\b(exceeded|exhausted|insufficient|out of|no remaining|"
    r"depleted)\b.{0,40}\b(quota|credits?|balance)\b",
    re.IGNORECASE,
)
# ... unless they name a window a wait does pass: a quota of requests per minute is a rate.
_PER_WINDOW = re.compile(
    r"\bper[ -]?(second|minute|min|hour)\b|/(s|sec|min|m)\b|\b[rt]p[ms]\b|rate[ _-]?limit",
    re.IGNORECASE,
)


class ErrorReply(Exception):
    """The server answered a request with an error object instead of a completion (some
    gateways do so with HTTP 200): its message, and the HTTP status its `code` (a number, or
    a word of STATUS_OF, else its `type`'s) stands for, None when it says none."""

    def __init__(
        self,
        message: str,
        code: int | None,
        fields: dict[str, Any] | None = None,
        said: str = "",
    ) -> None:
        super().__init__(message)
        self.message, self.code = message, code
        self.fields = fields or {}  # the error object as sent (a context overflow's numbers)
        self.said = said or (str(code) if code is not None else "")  # its code, as sent

    @property
    def words(self) -> set[str]:
        """Its `code` and `type` as words."""
        return {str(self.fields.get(key) or "") for key in ("code", "type")}

    @property
    def out_of_quota(self) -> bool:
        """Whether it says the account's quota is used up, which no wait cures."""
        return QUOTA_CODE in self.words or says_spent(self.message)

    @property
    def overflow(self) -> bool:
        """Whether its code says the request did not fit the context window."""
        return OVERFLOW_CODE in self.words

    @property
    def retryable(self) -> bool:
        """Whether the code (if any) says the server is busy or broken, not the request wrong."""
        if self.out_of_quota:
            return False
        return self.code is None or self.code in BUSY_CODES or self.code >= 500


def says_spent(message: str) -> bool:
    """Whether an error's words say the account's quota or credit is used up (OpenAI's
    "You exceeded your current quota", a gateway's "quota exceeded"), not that requests came
    faster than a per-minute limit allows."""
    return bool(_SPENT.search(message)) and not _PER_WINDOW.search(message)


def error_reply(body: dict[str, Any]) -> ErrorReply | None:
    """The error a body carries in place of choices (`{"error": {"message": ..., "code": ...}}`
    or `{"error": "..."}`), else None."""
    err = body.get("error")
    if not err or body.get("choices"):
        return None
    return error_object(err)


def error_object(err: Any) -> ErrorReply:
    """The ErrorReply an `error` field holds: its message, and the status its `code` stands
    for (a number, digits as text, a word of STATUS_OF), else its `type`."""
    inner = err if isinstance(err, dict) else {}
    message = inner.get("message") if inner else err
    code, kind = inner.get("code"), inner.get("type")
    status = _status(code)
    said = str(code) if status is not None else ""
    if status is None and isinstance(kind, str) and kind in STATUS_OF:
        status, said = STATUS_OF[kind], kind
    return ErrorReply(str(message or err)[:300], status, inner, said[:64])


def _status(code: Any) -> int | None:
    """The HTTP status an error object's `code` stands for, None when it names none."""
    if isinstance(code, str) and code.isdecimal() and len(code) == 3:
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    return STATUS_OF.get(code) if isinstance(code, str) else None


class NotJson(Exception):
    """The server answered a chat request with a body that is no JSON at all: a page (a
    proxy's or a captive portal's sign-in, a web UI at the base URL) or words, the endpoint's
    answer rather than any the model wrote. `words` is its text, without tags, bounded."""

    def __init__(self, raw: bytes) -> None:
        self.words = page_words(raw.decode("utf-8", "replace"))
        super().__init__(f"the reply is not JSON but {self.words!r}")


def page_words(text: str, limit: int = 300) -> str:
    """The words of a page or a text body: tags, scripts and styles left out, blanks and
    control characters made single spaces, at most `limit` characters."""
    text = _TAG.sub(" ", _unhidden(text[:PAGE_CHARS]))
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())[:limit]


def _unhidden(text: str) -> str:
    """`text` without what its scripts and styles hold (each cut to the end of its element)."""
    low, kept, at = text.lower(), [], 0
    while found := _HIDDEN.search(low, at):
        kept.append(text[at : found.start()])
        end = low.find(f"</{found.group(1)}", found.end())
        at = len(text) if end < 0 else end
    return " ".join([*kept, text[at:]])


PAGE_CHARS = 100_000  # of a page's start its words are taken from
_TAG = re.compile(r"<[^>]{0,2000}>")
_HIDDEN = re.compile(r"<(script|style)\b")


class Filtered(Exception):
    """The provider's content filter stopped the reply before it held anything (a
    `finish_reason` of "content_filter" with no text and no tool call)."""

    def __init__(self) -> None:
        super().__init__("the provider's content filter stopped the reply (content_filter)")


def load_body(raw: str | bytes, what: str = "the endpoint's reply") -> Any:
    """A response body (or one streamed chunk) as JSON, or MalformedReply saying why not."""
    try:
        return strictjson.loads(raw)
    except ValueError as e:
        raise MalformedReply(f"{what} is not usable JSON: {e}", NOT_A_COMPLETION) from None


MAX_COUNT = 10**12  # no reply counts more tokens than this; a larger count is not believed


def _count(value: Any) -> int:
    """A token count from a usage field: a non-negative int up to MAX_COUNT (floats are
    truncated); anything else (text, a list, a bool) is not a count, so 0: an odd usage field
    costs its numbers, never the reply."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return min(MAX_COUNT, max(0, int(value)))


def _fields(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def read_usage(body: dict[str, Any]) -> Usage:
    """Prompt, completion and cached tokens; cached from `prompt_tokens_details` or llama.cpp's
    `timings.cache_n`."""
    usage = _fields(body.get("usage"))
    prompt = _count(usage.get("prompt_tokens"))
    details = _fields(usage.get("prompt_tokens_details"))
    cached = _count(details.get("cached_tokens"))
    timings = _fields(body.get("timings"))
    if not cached:
        cached = _count(timings.get("cache_n"))
        # llama.cpp without `usage` still reports what it read (prompt_n) and reused (cache_n).
        prompt = prompt or cached + _count(timings.get("prompt_n"))
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=_count(usage.get("completion_tokens")),
        cached_tokens=min(cached, prompt),
        calls=1,
    )


def _arguments(raw: Any) -> str:
    """Tool-call arguments as the JSON text the model sent (an object is serialised); none
    (null, as some servers send for a call without arguments) is no text, as in a stream.
    Arguments encoded twice (a JSON string whose text is a JSON object, as some servers and
    gateways send them) are the object's text."""
    if raw is None:
        return ""
    text = raw if isinstance(raw, str) else json.dumps(raw)
    if not text.lstrip().startswith('"'):
        return text
    try:
        inner = strictjson.loads(text)
        if isinstance(inner, str) and isinstance(strictjson.loads(inner), dict):
            return inner
    except ValueError:
        pass
    return text


def parse_completion(body: Any) -> ChatReply:
    """A chat-completion JSON body as a ChatReply; ErrorReply if it is the server's error
    instead (an error object, or a reply it ended with finish_reason "error"), Filtered if
    the provider's content filter left nothing of it, MalformedReply if it is none of these."""
    if not isinstance(body, dict):
        raise MalformedReply("the endpoint's reply is not a JSON object")
    if failed := error_reply(body):
        raise failed
    try:
        reply = _parse_fields(body)
    except (
        AttributeError,
        TypeError,
        ValueError,
        OverflowError,
    ) as e:  # a field of the wrong shape
        raise MalformedReply(
            f"the endpoint's reply is not a chat completion ({e})", NOT_A_COMPLETION
        ) from None
    if reply.finish_reason == "error":  # OpenRouter's word for a generation that failed
        raise ErrorReply('the server ended the reply with finish_reason "error"', None)
    filtered = reply.finish_reason == "content_filter"
    if filtered and not reply.tool_calls and not (reply.content or "").strip():
        raise Filtered
    return reply


def _parse_fields(body: dict[str, Any]) -> ChatReply:
    """The ChatReply in a body; AttributeError/TypeError/ValueError when a field has the wrong shape."""
    reply = ChatReply(usage=read_usage(body))
    choices = body.get("choices") or []
    if not choices:
        reply.finish_reason = "no_choices"
        return reply
    message = choices[0].get("message") or {}
    reply.content = message_text(message.get("content"))
    reason = choices[0].get("finish_reason")
    reply.finish_reason = None if reason is None else str(reason)
    ids: set[str] = set()
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") or {}
        reply.tool_calls.append(
            ToolCall(
                id=_unique(str(call.get("id") or f"call_{i}"), i, ids),
                name=str(fn.get("name") or ""),
                arguments=_arguments(fn.get("arguments", "{}")),
            )
        )
    return reply


def message_text(content: Any) -> str | None:
    """A message's (or a delta's) text: a string, or a list of content parts as some servers
    and gateways send it (`[{"type": "text", "text": ...}]`; Mistral's reasoning models put
    `thinking` parts beside the text), whose text parts are joined and the rest left out;
    TypeError for anything else."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
        raise TypeError("the message content is not text")
    texts = [p.get("text") for p in content if p.get("type", "text") == "text"]
    if not all(isinstance(t, str) for t in texts):
        raise TypeError("a text part of the message content is not text")
    return "".join(texts) if texts else None


def _unique(ident: str, i: int, ids: set[str]) -> str:
    """A call's id, made unique within its reply: a repeated id (some servers and parsers
    give every call the same one) would pair each tool result with the wrong call, and a
    strict server refuses a request whose tool results share an id."""
    while ident in ids:
        ident = f"{ident}_{i}"
    ids.add(ident)
    return ident
