"""Reading a failed request: a context overflow, a refused connection, a busy server."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

from agent_cli.core.errors import ContextOverflow

# Come back later; anything else is about the request. 529 is "overloaded" (Anthropic's
# OpenAI-compatible endpoint and gateways before it), 520-524 Cloudflare's word that the
# server behind it did not answer well (down, unreachable, timed out), however fast it came.
BUSY_STATUSES = (429, 502, 503, 504, 520, 521, 522, 523, 524, 529)
FAST_FAILURE_S = 1.0  # a 5xx this quick is a verdict on the request, not a hiccup

_OVERFLOW_MARKERS = (
    "context length",
    "context size",
    "context window",
    "maximum context",
    "exceed_context_size",
    "prompt is too long",
    "too many tokens",
)
# llama.cpp: "request (4139 tokens) exceeds the available context size (4096 tokens)"
_LLAMA = re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)")
# vLLM and OpenAI: "maximum context length is 4096 tokens. However, you requested 5000 tokens
# (1000 in the messages, 4000 in the completion)"; newer vLLM: "'max_tokens' or
# 'max_completion_tokens' is too large: 4000. This model's maximum context length is 4096 tokens
# and your request has 1000 input tokens (4000 > 4096 - 1000)"
_WINDOW = re.compile(r"maximum context length is (\d+) tokens")
_IN_MESSAGES = re.compile(r"(\d+) in the messages|your request has (\d+) input tokens")
MAX_TOKENS = 100_000_000  # a count past this in an error's fields is not believed


_STREAMING = re.compile(r"\bstream(ing|_options)?\b")


def mentions_streaming(detail: str) -> bool:
    """Whether a refusal names streaming (`stream`, `stream_options`, "streaming")."""
    return bool(_STREAMING.search(detail.lower()))


def is_overflow(detail: str) -> bool:
    """Whether an error message says the request did not fit the context window."""
    low = detail.lower()
    return any(marker in low for marker in _OVERFLOW_MARKERS)


def overflow_numbers(detail: str, error: object = None) -> tuple[int | None, int | None]:
    """(prompt tokens, window) of an overflow, when the server gave them: in the fields of its
    `error` object (llama.cpp's `n_prompt_tokens` and `n_ctx`, which newer builds give only
    there), else named in its message."""
    prompt, window = _counted(error, "n_prompt_tokens"), _counted(error, "n_ctx")
    if m := _LLAMA.search(detail):
        return prompt or int(m.group(1)), window or int(m.group(2))
    named = _WINDOW.search(detail)
    in_messages = _IN_MESSAGES.search(detail)
    counted = in_messages and (in_messages.group(1) or in_messages.group(2))
    return (
        prompt or (int(counted) if counted else None),
        window or (int(named.group(1)) if named else None),
    )


def _counted(error: object, key: str) -> int | None:
    """A token count under `key` in an error object (or a body holding one under `error`):
    a positive int of a believable size, else None."""
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    value = error.get(key) if isinstance(error, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_TOKENS:
        return value
    return None


def overflow_error(detail: str, base_url: str, error: object = None) -> ContextOverflow:
    """The typed error for a request that did not fit, with numbers when the server gave them
    (in its message, or in the fields of its `error` object)."""
    prompt, window = overflow_numbers(detail, error)
    size = f" ({prompt} tokens)" if prompt else ""
    limit = f" of {window} tokens" if window else ""
    return ContextOverflow(
        f"the request{size} does not fit the context window{limit} of {base_url}",
        "lower memory_max_tokens and tool_output_max_tokens, or start the server with a larger "
        "context (llama.cpp -c N, Ollama num_ctx / OLLAMA_CONTEXT_LENGTH, vLLM --max-model-len)",
        prompt_tokens=prompt,
        window=window,
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it, and so on (each once: a chain may loop)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def refused(exc: BaseException) -> bool:
    """Whether a connection failure is a refused connection or an unknown host (no retry helps)."""
    for cur in _chain(exc):
        if isinstance(cur, (ConnectionRefusedError, socket.gaierror)):
            return True
        text = str(cur).lower()
        if (
            "connection refused" in text
            or "name or service not known" in text
            or "nodename nor servname" in text
            or "temporary failure in name resolution" in text
        ):
            return True
    return False


def misdirected(exc: BaseException) -> str | None:
    """What is wrong when a connection failure is the endpoint sending the request elsewhere
    (no retry helps): redirects in a loop, or to an address that is not http(s); else None.
    Told by the transport's exception names, the transport being the SDK's to import."""
    for cur in _chain(exc):
        name = type(cur).__name__
        if name == "TooManyRedirects":
            return "it redirects the request in a loop"
        if name == "UnsupportedProtocol":
            return f"it redirects the request to an address that is not http(s) ({cur})"
    return None


def is_transport_error(exc: BaseException) -> bool:
    """Whether an exception raised while reading a response is the connection breaking."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(
        names & {"TransportError", "HTTPError", "StreamError", "ProtocolError"}
    ) or isinstance(exc, OSError)


def is_timeout(exc: BaseException) -> bool:
    """Whether an exception raised while reading a response is a read timeout."""
    return any("Timeout" in c.__name__ for c in type(exc).__mro__) or isinstance(exc, TimeoutError)
