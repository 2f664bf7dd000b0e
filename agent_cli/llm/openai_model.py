"""The model client on the `openai` package; the only module that imports it.

Retries are ours, not the SDK's (it is built with max_retries=0), so the count and the
backoff come from settings and every failure ends as one of our errors with a how-to-fix.
The reply body is parsed here rather than by the SDK's models, so a server that omits
fields (llama.cpp, older vLLM) or sends no choices still yields a `ChatReply`.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import openai

from agent_cli.errors import ConfigError, MalformedReply, ModelError
from agent_cli.llm.base import Message, cost
from agent_cli.models import ChatReply, ToolCall, Usage

OPENAI_HOST = "api.openai.com"
_RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
              openai.APIConnectionError)


def _client(base_url: str, api_key: str | None, timeout_s: float) -> openai.OpenAI:
    if not api_key and OPENAI_HOST in base_url:
        raise ConfigError("no API key is set for " + base_url,
                          "export OPENAI_API_KEY=..., or point --base-url at a local server")
    # Local servers (vLLM, Ollama, llama.cpp) accept any key; the SDK insists on one.
    return openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed",
                         timeout=timeout_s, max_retries=0)


def _status_error(e: openai.APIStatusError, base_url: str, model: str) -> ModelError:
    status = e.status_code
    detail = _error_message(e)
    if status in (401, 403):
        return ModelError(f"{base_url} refused the API key ({status}: {detail})",
                          "check OPENAI_API_KEY; it must be a valid key for this endpoint")
    if status == 404:
        return ModelError(f"model {model!r} was not found at {base_url} ({detail})",
                          "run `agent doctor` to list the endpoint's models, then set --model")
    if status == 429:
        return ModelError(f"{base_url} kept rate-limiting the requests ({detail})",
                          "wait a minute and resume with `agent run --resume`")
    if status >= 500:
        return ModelError(f"{base_url} kept failing with {status} ({detail})",
                          "the server is in trouble; resume later with `agent run --resume`")
    return ModelError(f"{base_url} rejected the request ({status}: {detail})",
                      "check --model and that the server supports function tools")


def _error_message(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        msg = body.get("message") or (body.get("error") or {}).get("message")
        if msg:
            return str(msg)[:200]
    return (e.message or "")[:200]


def _convert(e: Exception, base_url: str, model: str) -> ModelError:
    if isinstance(e, openai.APITimeoutError):
        return ModelError(f"{base_url} did not answer in time",
                          "raise request_timeout_s or check the server's load")
    if isinstance(e, openai.APIConnectionError):
        return ModelError(f"cannot reach the model endpoint {base_url}",
                          "is the server running? check --base-url / OPENAI_BASE_URL")
    if isinstance(e, openai.APIStatusError):
        return _status_error(e, base_url, model)
    return ModelError(f"the model call failed: {e}", "run `agent doctor`")


def parse_completion(body: Any) -> ChatReply:
    """A chat-completion JSON body as a ChatReply; MalformedReply if it is not one."""
    if not isinstance(body, dict):
        raise MalformedReply("the endpoint's reply is not a JSON object")
    try:
        return _parse_fields(body)
    except (AttributeError, TypeError, ValueError) as e:  # a field of the wrong shape
        raise MalformedReply(f"the endpoint's reply is not a chat completion ({e})",
                             "check that --base-url points at a Chat Completions API") from None


def _parse_fields(body: dict) -> ChatReply:
    """The ChatReply in a body; AttributeError/TypeError/ValueError when a field has the wrong shape."""
    usage = body.get("usage") or {}
    reply = ChatReply(usage=Usage(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                                  completion_tokens=int(usage.get("completion_tokens") or 0),
                                  calls=1))
    choices = body.get("choices") or []
    if not choices:
        reply.finish_reason = "no_choices"
        return reply
    message = choices[0].get("message") or {}
    reply.content = message.get("content")
    reply.finish_reason = choices[0].get("finish_reason")
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") or {}
        args = fn.get("arguments", "{}")
        reply.tool_calls.append(ToolCall(
            id=call.get("id") or f"call_{i}", name=str(fn.get("name") or ""),
            arguments=args if isinstance(args, str) else json.dumps(args)))
    return reply


class OpenAIChat:
    """ChatModel on any OpenAI-compatible Chat Completions endpoint."""

    def __init__(self, *, model: str, base_url: str, api_key: str | None,
                 price_in: float = 0.0, price_out: float = 0.0, timeout_s: float = 120.0,
                 max_retries: int = 4, backoff_s: float = 1.0, max_tokens: int | None = None,
                 on_retry=None) -> None:
        self.name = model
        self.base_url = base_url
        self.usage = Usage()
        self._client = _client(base_url, api_key, timeout_s)
        self._prices = (price_in, price_out)
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._max_tokens = max_tokens
        self._on_retry = on_retry

    def chat(self, messages: list[Message], tools: list[dict] | None = None,
             tool_choice: str | dict | None = None) -> ChatReply:
        """One assistant turn; retried on 429, 5xx and timeouts."""
        kwargs: dict[str, Any] = {"model": self.name, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = tool_choice or "auto"
        if self._max_tokens:
            kwargs["max_tokens"] = self._max_tokens
        raw = self._with_retries(lambda: self._client.chat.completions.with_raw_response.create(
            **kwargs))
        try:
            body = json.loads(raw.http_response.text)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise MalformedReply("the endpoint's reply is not JSON",
                                 "check that --base-url points at a Chat Completions API") from None
        reply = parse_completion(body)
        reply.usage.cost_usd = cost(reply.usage.prompt_tokens, reply.usage.completion_tokens,
                                    *self._prices)
        self.usage.add(reply.usage)
        return reply

    def list_models(self) -> list[str]:
        """The model ids the endpoint serves (GET /models)."""
        page = self._with_retries(lambda: self._client.models.list())
        return [m.id for m in page.data]

    def _with_retries(self, call):
        for attempt in range(self._max_retries + 1):
            try:
                return call()
            except _RETRYABLE as e:
                if attempt == self._max_retries:
                    raise _convert(e, self.base_url, self.name) from None
                delay = _delay(e, attempt, self._backoff_s)
                if self._on_retry:
                    self._on_retry(attempt + 1, delay, str(e)[:120])
                time.sleep(delay)
            except openai.OpenAIError as e:
                raise _convert(e, self.base_url, self.name) from None
        raise AssertionError("unreachable")


def _delay(e: Exception, attempt: int, base: float) -> float:
    """Exponential backoff with jitter, honouring a short Retry-After."""
    response = getattr(e, "response", None)
    retry_after = response.headers.get("retry-after") if response is not None else None
    if retry_after:
        try:
            return min(float(retry_after), 30.0)
        except ValueError:
            pass
    return min(base * (2 ** attempt), 30.0) * (0.75 + random.random() / 2)


class OpenAIEmbedder:
    """Embedder on an OpenAI-compatible /embeddings endpoint."""

    def __init__(self, *, base_url: str, api_key: str | None, model: str,
                 timeout_s: float = 60.0) -> None:
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
