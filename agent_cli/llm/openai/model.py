"""The model client on the `openai` package; the only module that imports it.

Retries are ours, not the SDK's (it is built with max_retries=0), so the count and the
backoff come from settings and every failure ends as one of our errors with a how-to-fix.
Bodies are parsed here (`wire`, `stream`) rather than by the SDK's models, so a server that
omits fields (llama.cpp, older vLLM) or sends no choices still yields a `ChatReply`.

What a server does not support is learned once and kept for the run: streaming (a server
that answers whole, or refuses `stream`), the form of a forced tool (`"required"` first,
then the object form, then a json_schema `response_format`, when refused or ignored; see
forcing.py), `max_completion_tokens` instead of `max_tokens`.
Which failures are retried:
- refused connections and unknown hosts: never (the server is not there);
- 429, 502, 503, 504, timeouts, streams cut mid-reply, slow 5xx: with backoff;
- a 5xx answered in under a second: it is a verdict on the request, so it is not sent again
  as it was (a streamed request is tried once whole, since streaming is what some servers
  fail on; then the error stands);
- a timeout: only once the server has stopped working on the abandoned request, where it
  says so (llama.cpp `/slots`), so no retry queues behind it;
- a context overflow: never as is; when the server named the prompt's size and a smaller
  `max_tokens` fits, once with that, else `ContextOverflow` for the caller to shrink.
With streaming, `request_timeout_s` bounds the silence between chunks, not the whole reply.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai

from agent_cli.core.errors import ConfigError, MalformedReply, ModelError
from agent_cli.core.models import ChatReply, Usage
from agent_cli.llm.base import Message, reply_cost
from agent_cli.llm.server import info as server_info
from agent_cli.llm.wire import failures, outgoing
from agent_cli.llm.wire.body import load_body, parse_completion
from agent_cli.llm.wire.content_calls import calls_from_content
from agent_cli.llm.wire.forcing import Forcing
from agent_cli.llm.wire.stream import StreamCut, StreamFailed, assemble

__all__ = ["OpenAIChat", "OpenAIEmbedder", "parse_completion"]

OPENAI_HOST = "api.openai.com"
DEFAULT_CONTEXT_WINDOW = 128_000


class StreamSilent(Exception):
    """No chunk arrived within the timeout while a reply was streaming."""


def _client(base_url: str, api_key: str | None, timeout_s: float) -> openai.OpenAI:
    if not api_key and OPENAI_HOST in base_url:
        raise ConfigError(
            "no API key is set for " + base_url,
            "export OPENAI_API_KEY=..., or point --base-url at a local server",
        )
    # Local servers (vLLM, Ollama, llama.cpp) accept any key; the SDK insists on one.
    return openai.OpenAI(
        base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
    )


def _error_message(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        inner = body.get("error")
        msg = body.get("message") or (inner.get("message") if isinstance(inner, dict) else inner)
        if msg:
            return str(msg)[:300]
    return (e.message or "")[:300]


def _status_error(e: openai.APIStatusError, base_url: str, model: str) -> ModelError:
    status, detail = e.status_code, _error_message(e)
    if status in (401, 403):
        return ModelError(
            f"{base_url} refused the API key ({status}: {detail})",
            "check OPENAI_API_KEY; it must be a valid key for this endpoint",
        )
    if status == 404:
        return ModelError(
            f"model {model!r} was not found at {base_url} ({detail})",
            "run `agent doctor` to list the endpoint's models, then set --model",
        )
    if status == 429:
        return ModelError(
            f"{base_url} kept rate-limiting the requests ({detail})",
            "wait a minute and resume with `agent run --resume`",
        )
    if status >= 500:
        return ModelError(
            f"{base_url} kept failing with {status} ({detail})",
            "the server is in trouble; resume later with `agent run --resume`",
        )
    return ModelError(
        f"{base_url} rejected the request ({status}: {detail})",
        "check --model and that the server supports function tools",
    )


def _convert(e: BaseException, base_url: str, model: str, timeout_s: float = 0) -> ModelError:
    if isinstance(e, (openai.APITimeoutError, StreamSilent)):
        return ModelError(
            f"{base_url} did not answer in time (nothing for {timeout_s:g} s)",
            "raise request_timeout_s or check the server's load",
        )
    if isinstance(e, openai.APIConnectionError):
        return ModelError(
            f"cannot reach the model endpoint {base_url}",
            "is the server running? check --base-url / OPENAI_BASE_URL",
        )
    if isinstance(e, openai.APIStatusError):
        return _status_error(e, base_url, model)
    if isinstance(e, (StreamCut, StreamFailed)):
        return ModelError(
            f"{base_url} kept breaking off its streamed replies ({e})",
            "check the server's log; resume with `agent run --resume`",
        )
    return ModelError(f"the model call failed: {e}", "run `agent doctor`")


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
        on_retry: Callable[[int, float, str], None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> None:
        self.name = model
        self.base_url = base_url
        self.usage = Usage()
        self._client = _client(base_url, api_key, timeout_s)
        self._prices = (price_in, price_out, price_cached)
        self._timeout_s = timeout_s
        self._max_retries, self._backoff_s = max_retries, backoff_s
        self._max_tokens = max_tokens
        self._tokens_key = "max_tokens"
        self._configured_window = context_window
        self._window: tuple[int, str] | None = None
        self._on_retry, self.on_text = on_retry, on_text
        self.streaming = stream  # False once the server showed it does not stream
        self._stream_troubles = 0
        self._usage_in_stream = True
        self.forcing = Forcing()  # how a forced tool is asked for (forcing.py)

    # -- what the server can take -----------------------------------------------------------
    @property
    def context_window(self) -> int:
        """The server's context size in tokens, learned from it on first use (else the setting)."""
        if self._window is None:
            learned = server_info.learn_context_window(self._fetch, self.base_url, self.name)
            self._window = learned or (
                self._configured_window or DEFAULT_CONTEXT_WINDOW,
                "the context_window setting",
            )
        return self._window[0]

    @property
    def context_source(self) -> str:
        """Where `context_window` came from."""
        _ = self.context_window
        return self._window[1] if self._window else ""

    # -- one turn -----------------------------------------------------------------------------
    def chat(
        self,
        messages: list[Message],
        tools: list[dict] | None = None,
        tool_choice: str | dict | None = None,
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
            reply.usage.cost_usd = reply_cost(reply.usage, self._prices)
            self.usage.add(reply.usage)
            spent.add(reply.usage)
            if not call.forced or not self.forcing.answered(bool(reply.tool_calls)):
                reply.usage = spent
                return reply

    def _request(
        self,
        messages: list[Message],
        tools: list[dict] | None,
        tool_choice: str | dict | None,
        call: _Call,
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.name, "messages": outgoing.sanitize(messages)}
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

    def _once(self, kwargs: dict[str, Any]) -> ChatReply:
        """One HTTP exchange, streamed or whole."""
        completions = self._client.chat.completions
        if not kwargs.get("stream"):
            raw = completions.with_raw_response.create(**kwargs)
            return parse_completion(load_body(raw.http_response.content))
        with completions.with_streaming_response.create(**kwargs) as response:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                self.streaming = False  # it answered whole: ask for whole replies from now on
                return parse_completion(load_body(response.read()))
            # Structured output is a forced tool's arguments (forcing.py), not words to show.
            shown = None if "response_format" in kwargs else self.on_text
            return parse_completion(self._read_stream(response, shown))

    def _read_stream(self, response, on_text: Callable[[str], None] | None) -> dict:
        try:
            return assemble(response.iter_lines(), on_text)
        except (MalformedReply, StreamCut, StreamFailed):
            raise
        except Exception as e:  # the transport broke or went silent mid-reply
            if failures.is_timeout(e):
                raise StreamSilent(f"no data for {self._timeout_s:g} s: timed out") from None
            if failures.is_transport_error(e):
                raise StreamCut(f"the connection broke mid-reply ({type(e).__name__})") from None
            raise

    # -- retries ------------------------------------------------------------------------------
    def _send(self, build: Callable[[], dict], call: _Call) -> ChatReply:
        attempt = 0
        while True:
            kwargs = build()
            started = time.monotonic()
            try:
                reply = self._once(kwargs)
                self._note_whole_success(call)
                return reply
            except openai.APIStatusError as e:
                if self._adapt(e, kwargs, call):
                    continue
                failure: BaseException = self._status_failure(
                    e, kwargs, call, time.monotonic() - started
                )
            except (openai.APITimeoutError, StreamSilent) as e:
                failure = e
                self._settle()
            except openai.APIConnectionError as e:
                if failures.refused(e):
                    raise self._convert(e) from None
                failure = e
            except (StreamCut, StreamFailed) as e:
                failure = e
            except openai.OpenAIError as e:
                raise self._convert(e) from None
            attempt += 1
            if attempt > self._max_retries:
                raise self._convert(failure) from None
            self._pause(attempt, failure)

    def _convert(self, e: BaseException) -> ModelError:
        return _convert(e, self.base_url, self.name, self._timeout_s)

    def _adapt(self, e: openai.APIStatusError, kwargs: dict, call: _Call) -> bool:
        """Change the request for what the server refused; True to send it again now."""
        detail = _error_message(e)
        if e.status_code >= 500 and not failures.is_overflow(detail):
            return False
        if failures.is_overflow(detail):
            return self._fit_reply(detail, kwargs, call)
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

    def _fit_reply(self, detail: str, kwargs: dict, call: _Call) -> bool:
        """Ask once more with a reply that fits beside the prompt; else ContextOverflow."""
        prompt, window = failures.overflow_numbers(detail)
        if window and self._window and self._window[1] == "the context_window setting":
            self._window = (window, "the server's overflow error")
        asked = kwargs.get(self._tokens_key)
        if call.max_tokens is None and prompt and window and asked and prompt + 128 < window:
            call.max_tokens = min(asked, window - prompt - 16)
            if call.max_tokens < asked:
                return True
        raise failures.overflow_error(detail, self.base_url)

    def _status_failure(
        self, e: openai.APIStatusError, kwargs: dict, call: _Call, elapsed: float
    ) -> BaseException:
        """The failure to retry, or raise when retrying cannot help."""
        status = e.status_code
        if status < 500 and status != 429:
            raise self._convert(e) from None
        if status in failures.BUSY_STATUSES or elapsed >= failures.FAST_FAILURE_S:
            return e
        if kwargs.get("stream"):
            call.whole = True  # some servers fail on streamed tool calls: try it whole once
            return e
        raise ModelError(
            f"{self.base_url} kept failing with {status} ({_error_message(e)}); it "
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

    def _pause(self, attempt: int, failure: BaseException) -> None:
        delay = _delay(failure, attempt - 1, self._backoff_s)
        if self._on_retry:
            self._on_retry(attempt, delay, _why(failure))
        time.sleep(delay)

    def _fetch(self, url: str, body: dict | None, timeout: float) -> Any:
        """JSON from one of the server's own endpoints (server_info.Fetch); no retries."""
        options: Any = {"timeout": timeout}
        try:
            if body is None:
                return self._client.get(url, cast_to=object, options=options)
            return self._client.post(url, cast_to=object, body=body, options=options)
        except openai.APIConnectionError as e:
            if failures.refused(e) or isinstance(e, openai.APITimeoutError):
                raise server_info.Unreachable(str(e)) from None
            return None
        except (openai.OpenAIError, ValueError, RecursionError):
            return None

    def list_models(self) -> list[str]:
        """The model ids the endpoint serves (GET /models)."""
        try:
            return [m.id for m in self._client.models.list().data]
        except openai.OpenAIError as e:
            raise self._convert(e) from None


def _why(failure: BaseException) -> str:
    if isinstance(failure, openai.APIStatusError):
        return f"{failure.status_code}: {_error_message(failure)}"[:120]
    return (str(failure) or type(failure).__name__)[:120]


def _delay(e: BaseException, attempt: int, base: float) -> float:
    """Exponential backoff with jitter, honouring a short Retry-After."""
    response = getattr(e, "response", None)
    retry_after = response.headers.get("retry-after") if response is not None else None
    if retry_after:
        try:
            return min(float(retry_after), 30.0)
        except ValueError:
            pass
    return min(base * (2**attempt), 30.0) * (0.75 + random.random() / 2)


class OpenAIEmbedder:
    """Embedder on an OpenAI-compatible /embeddings endpoint."""

    def __init__(
        self, *, base_url: str, api_key: str | None, model: str, timeout_s: float = 60.0
    ) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self.base_url = base_url
        self._client = _client(base_url, api_key, timeout_s)
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """Vector length, learned from one call on first use."""
        if self._dim is None:
            self._dim = len(self.embed(["dimension probe"])[0])
        return self._dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        if not texts:
            return []
        try:
            resp = self._client.embeddings.create(model=self.model, input=texts)
        except openai.OpenAIError as e:
            raise _convert(e, self.base_url, self.model) from None
        vectors = [d.embedding for d in sorted(resp.data, key=lambda d: d.index)]
        self._dim = len(vectors[0]) if vectors else self._dim
        return vectors
