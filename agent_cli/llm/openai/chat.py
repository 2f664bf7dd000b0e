"""The chat model on the `openai` package: one turn, retried and adapted to the server.

Retries are ours, not the SDK's (it is built with max_retries=0), so the count and the
backoff come from settings and every failure ends as one of our errors with a how-to-fix
(errors.py).
Bodies are parsed here (`wire`, `stream`) rather than by the SDK's models, so a server that
omits fields (llama.cpp, older vLLM) or sends no choices still yields a `ChatReply`.

What a server does not support is learned once and kept for the run: streaming (a server
that answers whole, or refuses `stream`), the form of a forced tool (`"required"` first,
then the object form, then a json_schema `response_format`, when refused or ignored; see
forcing.py), `max_completion_tokens` instead of `max_tokens`. The context window and the
forcing form that worked are kept a day for a local server (server/findings.py) when the
caller names a cache directory (a probe that met a passing failure, 5xx, 429 or a broken
connection, got no answer, so its silence is not kept); a hosted API (server/locality.py) is never probed before it
has answered a chat request. Probes that met a passing failure and learned nothing leave the
window unsettled: the setting serves meanwhile, and the probes are sent again when a request is
next built, once the client's backoff for a retry has passed (doubling), up to PROBE_ROUNDS in
all, so a server that was still loading its model corrects the run's window as soon as it says.
Which failures are retried:
- refused connections and unknown hosts: never (the server is not there);
- 429, 502, 503, 504, 520-524, 529, timeouts, streams cut mid-reply, slow 5xx: with
  backoff; a stream that ended in good order without saying it was over (no finish_reason,
  no [DONE]) is retried streamed once, then asked for whole;
- an error object in place of a reply (some gateways send it with HTTP 200): with backoff,
  unless its `code` blames the request (a 4xx other than 429; a word such as OpenAI's
  `invalid_api_key`, or else its `type`, read as the status it stands for), which is then
  said as that status would be;
- a whole body that is no JSON at all (a proxy's or a captive portal's page, a web UI), and a
  reply the provider's content filter left empty: once more, then the error stands;
- a 5xx answered in under a second: it is a verdict on the request, so it is not sent again
  as it was (a streamed request is tried once whole, since streaming is what some servers
  fail on; then the error stands);
- a timeout: only once the server has stopped working on the abandoned request, where it
  says so (llama.cpp `/slots`), so no retry queues behind it;
- a context overflow: never as is; when the server named the prompt's size and a smaller
  `max_tokens` fits (in its message, or in its error object's fields), once with that, else
  `ContextOverflow` for the caller to shrink; the same prompt asked again after it is not
  sent (nothing was cut), but ends with an error that says why.
With streaming, `request_timeout_s` bounds the silence between chunks of reply data (a
stream of keep-alive comments alone ends after it, retried like silence), not the whole
reply; every exchange, its headers included, is bounded by `total_timeout_s` (30 times the
timeout unless given), since the read timeout starts again with every byte (deadline.py).
A reply's body is read up to MAX_REPLY_BYTES, then ended with an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import openai

from agent_cli.core import strictjson
from agent_cli.core.errors import ContextOverflow, MalformedReply, ModelError
from agent_cli.core.models import ChatReply, Usage
from agent_cli.core.redact import redact_messages
from agent_cli.llm.base import Message, reply_cost
from agent_cli.llm.openai import errors
from agent_cli.llm.openai.client import make_client
from agent_cli.llm.openai.deadline import Watchdog, ended_after
from agent_cli.llm.openai.errors import StreamIdle, StreamSilent
from agent_cli.llm.server import info as server_info
from agent_cli.llm.server.findings import Findings
from agent_cli.llm.server.locality import is_local
from agent_cli.llm.wire import failures, outgoing
from agent_cli.llm.wire.body import ErrorReply, Filtered, NotJson, load_body, parse_completion
from agent_cli.llm.wire.content_calls import calls_from_content
from agent_cli.llm.wire.forcing import FORMS, Forcing
from agent_cli.llm.wire.names import offered_name
from agent_cli.llm.wire.stream import (
    StreamAssembler,
    StreamCut,
    StreamFailed,
    StreamStalled,
    assemble,
    paced,
)

__all__ = ["OpenAIChat"]

DEFAULT_CONTEXT_WINDOW = 128_000
TOTAL_TIMEOUTS = 30  # a reply may take this many request timeouts in all
LISTING_TIMEOUTS = 2  # the list of models, which nothing generates, this many
MAX_REPLY_BYTES = 32 * 2**20  # a reply's body, as read; no reply the agent can use is larger
SETTING = "the context_window setting"
# How an event stream's first line begins, whatever content type it came under (a whole
# reply's JSON begins with `{`); _HEAD_BYTES of the body tell them apart.
_EVENT_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")
_HEAD_BYTES = 6
_DONE_AFTER = re.compile(rb"(?<=[}\]])\s*data:\s*\[DONE\]\s*\Z")
REMEMBERED = ", remembered from an earlier run"
PROBE_ROUNDS = 4  # the window probes, sent again while a passing failure kept them from answering

Json = dict[str, Any]
Tools = list[Json] | None
ToolChoice = str | Json | None


class _Passing(Exception):
    """A server's endpoint failed in a way that passes (5xx, 429, a broken connection)."""

    def __init__(self, error: openai.OpenAIError) -> None:
        super().__init__(str(error))
        self.error = error  # its Retry-After, if any, paces the next probe


@dataclass
class _Call:
    """What one chat() call changed in its own request between attempts."""

    forced: str | None
    any_tool: bool = False  # "required" with several tools: a call of any one of them
    schema: bool = False  # forced through response_format: the content is the arguments
    whole: bool = False  # send this request without streaming
    max_tokens: int | None = None  # a smaller reply that fits the window


class OpenAIChat:
    """ChatModel on any OpenAI-compatible Chat Completions endpoint."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None,
        price_in: float = 0.0,
        price_out: float = 0.0,
        price_cached: float | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_tokens: int | None = None,
        context_window: int | None = None,
        stream: bool = True,
        on_retry: Callable[[int, int, float, str], None] | None = None,
        on_text: Callable[[str], None] | None = None,
        cache_dir: Path | None = None,
        local: bool | None = None,
        total_timeout_s: float | None = None,
        secrets: tuple[str, ...] = (),
        set_by: errors.SetBy = errors.DEFAULT_SET_BY,
    ) -> None:
        self.name = model
        self.set_by = set_by  # the settings an error's fix names
        self.secrets = secrets  # masked, with the known key shapes, in every request sent
        self.base_url = base_url
        self.usage = Usage()
        self._connect = partial(make_client, base_url, api_key, timeout_s)
        self._client = self._connect()
        self._prices = (price_in, price_out, price_cached)
        self._timeout_s = timeout_s
        self._total_s = total_timeout_s or TOTAL_TIMEOUTS * timeout_s
        self._max_retries, self._backoff_s = max_retries, backoff_s
        self._max_tokens = max_tokens
        self._tokens_key = "max_tokens"
        self._configured_window = context_window
        self._window: tuple[int, str] | None = None  # None: not settled yet
        self._probe_rounds = 0  # window probes sent while it is not settled
        self._probe_again_at = 0.0  # time.monotonic() before which they are not sent again
        # a server of the user's own, probed at once (None: decided by the base URL's host)
        self.local = is_local(base_url) if local is None else local
        self._answered = False  # whether a chat request has been answered yet
        # what a local server showed in an earlier run, when the caller keeps it somewhere
        self._findings = Findings(cache_dir, base_url, model) if cache_dir and self.local else None
        self._on_retry, self.on_text = on_retry, on_text
        self.streaming = stream  # False once the server showed it does not stream
        self._stream_troubles = 0
        self._usage_in_stream = True
        # the prompt of the last request that overflowed, and the error it got
        self._overflowed: tuple[str, ContextOverflow] | None = None
        self._kept_form = self._remembered_form()
        self.forcing = Forcing(self._kept_form)  # how a forced tool is asked for (forcing.py)

    # -- what the server can take -----------------------------------------------------------
    @property
    def context_window(self) -> int:
        """The server's context size in tokens, learned from it on first use (else the setting)."""
        return self._found_window()[0]

    @property
    def context_source(self) -> str:
        """Where `context_window` came from."""
        return self._found_window()[1]

    def _found_window(self) -> tuple[int, str]:
        if self._window is not None:
            return self._window
        setting = (self._configured_window or DEFAULT_CONTEXT_WINDOW, SETTING)
        if not self.local and not self._answered:
            return setting  # a hosted API is not probed before it has answered a chat request
        if time.monotonic() < self._probe_again_at:
            return setting  # its probes failed a moment ago: asked again after the backoff
        learned, passing = self._learned_window()
        self._probe_rounds += 1
        if learned or passing is None or self._probe_rounds >= PROBE_ROUNDS:
            self._window = learned or setting
            return self._window
        # A server still loading its model (llama.cpp's 503 "Loading model") will say its
        # window in a moment: the setting serves until then, and the probes go out again with
        # a request built once the backoff a retried request waits has passed.
        wait = errors.delay(passing.error, self._probe_rounds - 1, self._backoff_s)
        self._probe_again_at = time.monotonic() + wait
        return setting

    def _learned_window(self) -> tuple[tuple[int, str] | None, _Passing | None]:
        """The window a local server showed within the day, else what the probes find now; and
        the passing failure that kept a probe from an answer, when one did."""
        if self._findings:
            found, value = self._findings.get("window")
            if found and value is None:
                return None, None  # it did not say then either
            if found and _is_window(value):
                return (int(value[0]), str(value[1]) + REMEMBERED), None
        passing: list[_Passing] = []  # the probes a temporary failure kept from an answer

        def fetch(url: str, body: Json | None, timeout: float) -> Any:
            try:
                return self._answer(url, body, timeout)
            except _Passing as e:
                passing.append(e)
                return None

        try:
            learned = server_info.probe_context_window(fetch, self.base_url, self.name)
        except server_info.Unreachable:
            return None, None  # the first request says so at once, with the how-to-fix
        # A server still loading its model (503), busy (429) or in trouble said nothing of its
        # window: that is not kept as its answer, so the next round (or run) asks again.
        if self._findings and (learned or not passing):
            self._findings.put("window", list(learned) if learned else None)
        return learned, None if learned or not passing else passing[-1]

    def _remembered_form(self) -> str:
        found, form = self._findings.get("forcing") if self._findings else (False, None)
        return form if found and form in FORMS else FORMS[0]

    def _remember_form(self) -> None:
        """Keep the forcing form that got a forced call, when it is new for this server."""
        if self._findings and self.forcing.known and self.forcing.form != self._kept_form:
            self._findings.put("forcing", self.forcing.form)
            self._kept_form = self.forcing.form

    # -- one turn -----------------------------------------------------------------------------
    def chat(
        self, messages: list[Message], tools: Tools = None, tool_choice: ToolChoice = None
    ) -> ChatReply:
        """One assistant turn; retried as the module docstring says. A forced tool that was not
        called is asked for again at once in the next form, until one works (forcing.py)."""
        spent = Usage()
        while True:
            forced = outgoing.forced_name(tools, tool_choice)
            call = _Call(
                forced=forced, any_tool=bool(tools) and not forced and tool_choice == "required"
            )
            reply = self._send(lambda: self._request(messages, tools, tool_choice, call), call)  # noqa: B023
            if tools and not reply.tool_calls and reply.content:
                reply.tool_calls, reply.content = calls_from_content(
                    reply.content, tools, call.forced, whole_arguments=call.schema
                )
            offered = [t.get("function", {}).get("name", "") for t in tools or []]
            for tool_call in reply.tool_calls:  # a name a server left dressed (names.py)
                tool_call.name = offered_name(tool_call.name, offered)
            reply.usage.cost_usd = reply_cost(reply.usage, self._prices)
            self.usage.add(reply.usage)
            spent.add(reply.usage)
            if not call.forced or not self.forcing.answered(bool(reply.tool_calls)):
                if call.forced and reply.tool_calls:
                    self._remember_form()
                reply.usage = spent
                return reply

    def _request(
        self, messages: list[Message], tools: Tools, tool_choice: ToolChoice, call: _Call
    ) -> Json:
        # Every request leaves through here: what it carries is redacted, whoever built it.
        sent = outgoing.sanitize(redact_messages(messages, self.secrets))
        kwargs: Json = {"model": self.name, "messages": sent}
        if tools:
            call.schema = self.forcing.shape(kwargs, tools, tool_choice, call.forced, call.any_tool)
        if self._max_tokens:
            cap = min(self._max_tokens, max(outgoing.MIN_REPLY_TOKENS, self.context_window // 4))
            kwargs[self._tokens_key] = call.max_tokens or outgoing.reply_budget(
                self.context_window, cap, kwargs["messages"], tools
            )
        if self.streaming and not call.whole:
            kwargs["stream"] = True
            if self._usage_in_stream:
                kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    def _once(self, kwargs: Json) -> ChatReply:
        """One HTTP exchange, streamed or whole, ended at `total_timeout_s` wherever it is (a
        server that trickles its headers a byte at a time too)."""
        with ended_after(
            self._total_s,
            self._client.close,
            self._reopen,
            lambda: self._too_long(f"the reply went on for over {self._total_s:g} s"),
        ):
            return self._exchange(kwargs)

    def _reopen(self) -> None:
        """A new client, for one a deadline closed under its exchange (deadline.py)."""
        self._client = self._connect()

    def _exchange(self, kwargs: Json) -> ChatReply:
        completions = self._client.chat.completions
        with completions.with_streaming_response.create(**kwargs) as response:
            chunks = self._capped(response.iter_bytes())
            # The body's first bytes, not its content type, tell a stream from a whole reply:
            # some servers and proxies stream as text/plain, application/json or with none,
            # some stream whatever `stream` asked for, and some send a whole reply as
            # text/event-stream. Under that type only the first chunk is looked at (an event
            # stream's own silence, blank lines too, is bounded by `paced`).
            if "text/event-stream" in response.headers.get("content-type", ""):
                head, chunks = self._head(chunks, 0)
                events = not head.startswith((b"{", b"["))
            else:
                head, chunks = self._head(chunks, _HEAD_BYTES)
                events = head.startswith(_EVENT_FIELDS)
            if not events:
                reply = parse_completion(self._whole_body(self._read_whole(chunks)))
                if kwargs.get("stream"):
                    # It answered whole: whole replies from now on. Only a completion shows
                    # it; a proxy's page or an error object says nothing of streaming.
                    self.streaming = False
                return reply
            # Structured output is a forced tool's arguments (forcing.py), not words to show.
            shown = None if "response_format" in kwargs else self.on_text
            return parse_completion(self._read_stream(chunks, shown))

    @staticmethod
    def _whole_body(raw: bytes) -> Any:
        """A whole reply's JSON; StreamCut when it breaks off inside it (a body cut short that
        ended in good order, which is asked for again) or is empty (a proxy that lost the
        server's answer), else MalformedReply for a bad one."""
        if not raw.strip():
            raise StreamCut("the reply's body was empty")
        if raw.lstrip()[:1] not in (b"{", b"["):
            raise NotJson(raw)  # a page or words: no JSON at all, the endpoint's, not a reply
        raw = _DONE_AFTER.sub(b"", raw)  # the end of a stream, which some proxies add
        try:
            return load_body(raw)
        except MalformedReply:
            if raw.lstrip()[:1] in (b"{", b"[") and strictjson.unfinished(raw):
                raise StreamCut(f"the reply's body broke off after {len(raw)} bytes") from None
            raise

    def _head(self, chunks: Iterator[bytes], size: int) -> tuple[bytes, Iterator[bytes]]:
        """The first bytes of a body past any leading whitespace (`size` of them, enough to
        tell an event stream's field name from JSON; 0: what the first chunk holds), and the
        body's chunks from its start again."""
        read = bytearray()
        try:
            for piece in chunks:
                read += piece
                if len(read.lstrip()) >= size:
                    break
        except ModelError:
            raise
        except Exception as e:  # the transport broke or went silent before the body began
            self._transport_failure(e)
        return bytes(read.lstrip()[: max(size, 1)]), itertools.chain([bytes(read)], chunks)

    def _read_whole(self, chunks: Iterable[bytes]) -> bytes:
        """A whole reply's body, read within `total_timeout_s` (a trickle does not keep it going)."""
        started, body = time.monotonic(), bytearray()
        try:
            for piece in chunks:
                body += piece
                if time.monotonic() - started > self._total_s:
                    raise self._too_long(f"the reply went on for over {self._total_s:g} s")
        except ModelError:
            raise
        except Exception as e:  # the transport broke or went silent mid-body
            self._transport_failure(e)
        return bytes(body)

    def _capped(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """`chunks`, or ModelError once they add up to more than MAX_REPLY_BYTES."""
        seen = 0
        for chunk in chunks:
            seen += len(chunk)
            if seen > MAX_REPLY_BYTES:
                raise ModelError(
                    f"{self.base_url}: the reply was larger than {MAX_REPLY_BYTES >> 20} MB, so "
                    "the request was ended",
                    "ask for shorter replies (max_tokens), or check that the server is a Chat "
                    "Completions API",
                )
            yield chunk

    def _too_long(self, why: str) -> ModelError:
        return ModelError(
            f"{self.base_url}: {why}, so the request was ended",
            f"the bound is {TOTAL_TIMEOUTS} times request_timeout_s: raise it, or ask for "
            "shorter replies (max_tokens)",
        )

    def _read_stream(self, chunks: Iterable[bytes], on_text: Callable[[str], None] | None) -> Json:
        lines = paced(chunks, self._timeout_s, self._total_s)
        acc = StreamAssembler(on_text)
        try:
            return assemble(lines, acc=acc)
        except (MalformedReply, StreamFailed, ErrorReply):
            raise
        except Exception as e:
            if acc.finish_reason is None:
                self._stream_failure(e)
            # The reply was over (its finish_reason came): a server that then keeps the stream
            # open, goes silent or drops the connection before [DONE] still gave it whole.
            with contextlib.suppress(MalformedReply, StreamFailed, ErrorReply):
                acc.end_event()  # an event whose blank line never came: its usage, likely
            return acc.body()

    def _stream_failure(self, e: Exception) -> NoReturn:
        """Raise a failure met while reading a stream as the one the retries know."""
        if isinstance(e, StreamStalled):
            if e.whole:
                raise self._too_long(str(e)) from None
            raise StreamIdle(f"{e}: timed out") from None
        if isinstance(e, (ModelError, StreamCut)):
            raise e
        self._transport_failure(e)  # the transport broke or went silent mid-reply

    def _transport_failure(self, e: Exception) -> NoReturn:
        """Raise a failure met while reading a reply as the one the retries know."""
        if failures.is_timeout(e):
            raise StreamSilent(f"no data for {self._timeout_s:g} s: timed out") from None
        if failures.is_transport_error(e):
            raise StreamCut(f"the connection broke mid-reply ({type(e).__name__})") from None
        raise e

    # -- retries ------------------------------------------------------------------------------
    def _send(self, build: Callable[[], Json], call: _Call) -> ChatReply:
        attempt = unfinished = unusable = 0
        while True:
            final = False  # the failure below may be asked once more only: this is its last try
            kwargs = build()
            self._unchanged_overflow(kwargs)
            started = time.monotonic()
            try:
                reply = self._once(kwargs)
                self._answered = True
                self._overflowed = None
                self._note_whole_success(call)
                return reply
            except openai.APIStatusError as e:
                if self._adapt(e, kwargs, call):
                    continue
                failure, final = self._status_failure(e, kwargs, call, time.monotonic() - started)
            except (openai.APITimeoutError, StreamSilent) as e:
                failure = e
                self._settle()
            except openai.APIConnectionError as e:
                if failures.refused(e) or failures.misdirected(e):
                    raise self._convert(e) from None
                failure = e
            except StreamCut as e:
                failure = e
                unfinished += e.unfinished
                # A stream that ends in good order but unfinished twice is how this server
                # streams this request: the next try asks for the reply whole.
                call.whole = call.whole or unfinished >= 2
            except StreamFailed as e:
                failure = e
            except ErrorReply as e:
                if (e.overflow or failures.is_overflow(e.message)) and self._fit_reply(
                    e.message, e.fields, kwargs, call
                ):
                    continue  # else ContextOverflow: the caller fits the request and asks again
                if not e.retryable:
                    raise self._convert(e) from None
                failure = e
            except (NotJson, Filtered) as e:
                # The endpoint's page, or the provider's filter: asking again rarely changes
                # either, so once more only (a passing page, another sample), then it stands.
                unusable += 1
                if unusable > 1:
                    raise self._convert(e) from None
                failure, final = e, True
            except openai.OpenAIError as e:
                raise self._convert(e) from None
            attempt += 1
            if attempt > self._max_retries:
                raise self._convert(failure) from None
            self._pause(attempt, attempt if final else self._max_retries, failure)

    def _convert(self, e: BaseException) -> ModelError:
        return errors.convert(e, self.base_url, self.name, self._timeout_s, self.set_by)

    def _adapt(self, e: openai.APIStatusError, kwargs: Json, call: _Call) -> bool:
        """Change the request for what the server refused; True to send it again now."""
        detail = errors.error_message(e)
        if e.status_code >= 500 and not failures.is_overflow(detail):
            return False
        if failures.is_overflow(detail):
            return self._fit_reply(detail, e.body, kwargs, call)
        if e.status_code not in (400, 422):
            return False
        low = detail.lower()
        if "stream_options" in kwargs and "stream_options" in low:
            self._usage_in_stream = False  # stream without it (the usage may then be missing)
            return True
        if kwargs.get("stream") and failures.mentions_streaming(low) and "tool_choice" not in low:
            self.streaming = False
            return True
        if call.forced and self.forcing.refused(low):
            return True
        if call.any_tool and ("tool_choice" in low or "response_format" in low):
            call.any_tool = False  # this server cannot force a call: ask as usual
            return True
        if self._tokens_key == "max_tokens" and "max_completion_tokens" in low:
            self._tokens_key = "max_completion_tokens"
            return True
        return False

    def _fit_reply(self, detail: str, error: object, kwargs: Json, call: _Call) -> bool:
        """Ask once more with a reply that fits beside the prompt; else ContextOverflow. The
        numbers are read from the message and from the fields of the `error` object."""
        prompt, window = failures.overflow_numbers(detail, error)
        source = self._window[1] if self._window else SETTING
        if window and (source == SETTING or source.endswith(REMEMBERED)):
            self._window = (window, "the server's overflow error")
            if self._findings:  # what was remembered is wrong now: the server was restarted
                self._findings.put("window", list(self._window))
        asked = kwargs.get(self._tokens_key)
        if call.max_tokens is None and prompt and window and asked and prompt + 128 < window:
            call.max_tokens = min(asked, window - prompt - 16)
            if call.max_tokens < asked:
                return True
        raise self._overflow(detail, kwargs, error)

    def _overflow(self, detail: str, kwargs: Json, error: object) -> ContextOverflow:
        """The ContextOverflow for `kwargs`'s request; its prompt is kept, so that the same
        prompt is not sent again as if the caller had cut it (`_unchanged_overflow`)."""
        overflow = failures.overflow_error(detail, self.base_url, error)
        self._overflowed = (_prompt_digest(kwargs), overflow)
        return overflow

    def _unchanged_overflow(self, kwargs: Json) -> None:
        """Raise, without sending it, a request whose prompt is the one the server just found
        too long: the caller fitted it again and nothing was cut. Not a ContextOverflow, since
        the caller would take it for a request that was cut and still did not fit."""
        if self._overflowed is None or self._overflowed[0] != _prompt_digest(kwargs):
            return
        overflow = self._overflowed[1]
        if overflow.window:
            why, hint = "it is within that window by the agent's own count", overflow.hint
        else:
            why = "the server's error does not say the window's size"
            hint = (
                "set context_window to the server's context size, or start the server with a "
                "larger context (llama.cpp -c N, Ollama num_ctx / OLLAMA_CONTEXT_LENGTH, vLLM "
                "--max-model-len)"
            )
        raise ModelError(
            f"{overflow.message}, and it could not be cut to fit ({why}), so it was not sent again",
            hint,
        )

    def _status_failure(
        self, e: openai.APIStatusError, kwargs: Json, call: _Call, elapsed: float
    ) -> tuple[BaseException, bool]:
        """The failure to retry, and whether it may be retried this once only; or raise when
        retrying cannot help."""
        status = e.status_code
        if (status < 500 and status != 429) or errors.out_of_quota(e):
            raise self._convert(e) from None
        if status in failures.BUSY_STATUSES or elapsed >= failures.FAST_FAILURE_S:
            return e, False
        if kwargs.get("stream"):
            call.whole = True  # some servers fail on streamed tool calls: try it whole once
            return e, True
        raise ModelError(
            f"{self.base_url} kept failing with {status} ({errors.error_message(e)}); it "
            f"answered in {elapsed * 1000:.0f} ms, so the same request was not sent "
            "again",
            "the server refuses this request: see its log, then `agent run --resume`",
        ) from None

    def _note_whole_success(self, call: _Call) -> None:
        """Stop streaming for the run once whole replies rescued streamed requests twice."""
        if call.whole and self.streaming:
            self._stream_troubles += 1
            self.streaming = self._stream_troubles < 2

    def _settle(self) -> None:
        """Wait until the server has stopped working on the request that timed out."""
        # Twice the timeout: a server that needs longer than that needs a larger timeout.
        if not server_info.wait_until_idle(
            self._fetch, self.base_url, max(2 * self._timeout_s, 10.0)
        ):
            raise ModelError(
                f"{self.base_url} is still working on a request that timed out; "
                "another would queue behind it",
                "raise request_timeout_s (the server needs longer), then `agent run --resume`",
            )

    def _pause(self, attempt: int, of: int, failure: BaseException) -> None:
        """Wait before retry `attempt` of the `of` this failure may have."""
        delay = errors.delay(failure, attempt - 1, self._backoff_s)
        if self._on_retry:
            self._on_retry(attempt, of, delay, errors.why(failure))
        time.sleep(delay)

    def _fetch(self, url: str, body: Json | None, timeout: float) -> Any:
        """JSON from one of the server's own endpoints (server_info.Fetch); no retries. Each
        fetch has a client of its own, closed at `timeout` in all (deadline.py), so a server
        that trickles its answer is Unreachable like a silent one."""
        try:
            return self._answer(url, body, timeout)
        except _Passing:
            return None

    def _answer(self, url: str, body: Json | None, timeout: float) -> Any:
        """As `_fetch`, but _Passing for a failure that says nothing lasting: a 5xx or 429
        answer, a connection that broke."""
        options: Any = {"timeout": timeout}
        client = self._connect()
        watchdog = Watchdog(timeout, client.close)
        try:
            with client, watchdog:
                if body is None:
                    return client.get(url, cast_to=object, options=options)
                return client.post(url, cast_to=object, body=body, options=options)
        except openai.APIConnectionError as e:
            if failures.refused(e) or isinstance(e, openai.APITimeoutError) or watchdog.fired:
                raise server_info.Unreachable(str(e)) from None
            if failures.misdirected(e):
                return None
            raise _Passing(e) from None
        except openai.APIStatusError as e:
            if e.status_code >= 500 or e.status_code == 429:
                raise _Passing(e) from None
            return None
        except (openai.OpenAIError, ValueError, RecursionError):
            return None

    def reach(self, timeout_s: float) -> None:
        """Raise the ModelError a request would when the endpoint cannot be reached at all:
        refused, no such host, no answer within `timeout_s` (GET /models, no retry). Any
        answer passes, an error status too: what it means is for the first request to say."""
        client = self._connect()
        watchdog = Watchdog(timeout_s, client.close)
        try:
            with client, watchdog:
                client.get("/models", cast_to=object, options={"timeout": timeout_s})
        except openai.APIConnectionError as e:
            if failures.misdirected(e):
                return  # something answers there, wrongly: the first request says what
            late = openai.APITimeoutError(request=e.request) if watchdog.fired else e
            raise errors.convert(late, self.base_url, self.name, timeout_s, self.set_by) from None
        except (openai.OpenAIError, ValueError, RecursionError):
            return

    def list_models(self) -> list[str]:
        """The model ids the endpoint serves (GET /models), within LISTING_TIMEOUTS request
        timeouts in all: the read timeout starts again with every byte, so a server that
        trickles its answer would otherwise hold `agent doctor` without end."""
        bound = LISTING_TIMEOUTS * self._timeout_s
        too_long = ModelError(
            f"{self.base_url}/models: the answer went on for over {bound:g} s, so the request "
            "was ended",
            "check the server's load, or that the base URL is an OpenAI-compatible endpoint "
            "(most end in /v1)",
        )
        with ended_after(bound, self._client.close, self._reopen, lambda: too_long):
            return self._listed_models()

    def _listed_models(self) -> list[str]:
        try:
            with errors.converted(self.base_url, self.name, self._timeout_s, self.set_by):
                try:
                    ids = [m.id for m in self._client.models.list().data]
                except openai.NotFoundError:
                    raise ModelError(
                        f"{self.base_url}/models was not found (HTTP 404)",
                        "check the base URL: an OpenAI-compatible one ends where /models and "
                        "/chat/completions are (most end in /v1)",
                    ) from None
        except (AttributeError, TypeError, ValueError, RecursionError):  # not a page of models
            ids = None
        if ids is None or not all(isinstance(i, str) for i in ids):
            raise ModelError(
                f"{self.base_url}/models did not answer with a list of models",
                "check that the base URL is an OpenAI-compatible endpoint (most end in /v1)",
            )
        return ids


def _prompt_digest(kwargs: Json) -> str:
    """A digest of a request's prompt: its messages and tools, not how long a reply it asks."""
    prompt = json.dumps([kwargs.get("messages"), kwargs.get("tools")], sort_keys=True, default=str)
    return hashlib.sha256(prompt.encode()).hexdigest()


def _is_window(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], int)
        and not isinstance(value[0], bool)
        and value[0] > 0
        and isinstance(value[1], str)
    )
