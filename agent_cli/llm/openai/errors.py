"""The openai SDK's failures turned into our `ModelError`s, each with a how-to-fix."""

from __future__ import annotations

import datetime
import email.utils
import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import openai

from agent_cli.core.errors import ModelError, ModelRefused
from agent_cli.llm.wire import failures
from agent_cli.llm.wire.body import ErrorReply, Filtered, NotJson, error_object, page_words
from agent_cli.llm.wire.stream import StreamCut, StreamFailed


class StreamSilent(Exception):
    """No chunk arrived within the timeout while a reply was streaming."""


class StreamIdle(StreamSilent):
    """Only keep-alive comments arrived within the timeout while a reply was streaming."""


@dataclass(frozen=True)
class SetBy:
    """The settings a fix names: what chose the model, which variable holds the key sent
    (a role's `executor_model` and `<role>_api_key_env`, the embedder's `embedding_model`);
    the roles whose endpoint it is, when the roles do not all share one, and what chose it."""

    model: str = "--model"
    key: str = "OPENAI_API_KEY"
    role: str = ""  # "executor", "planner and verifier"; "" when every role uses the endpoint
    url: str = "--base-url"  # the setting that named the endpoint (`executor_base_url`)
    # the endpoint is sent no key (a local server base_url does not name): what would send one
    unsent: str = ""

    def endpoint(self, base_url: str) -> str:
        """The endpoint as an error names it: by its roles too, when they are set apart."""
        return f"the {self.role} endpoint {base_url}" if self.role else base_url

    def key_fix(self) -> str:
        """How to fix a key the endpoint refused: check the one sent, or send one."""
        if self.unsent:
            return (
                "no key is sent to a server on this machine or network that base_url does not "
                f"name: set {self.unsent} to the name of the variable that holds its key"
            )
        return f"check {self.key}; it must be a valid key for this endpoint"

    def address_fix(self) -> str:
        """How to fix an address that reaches no OpenAI-compatible route."""
        which = f"check {self.url}" if self.role else "check the base URL"
        return (
            f"{which}: an OpenAI-compatible one ends where /models and /chat/completions are "
            "(most end in /v1)"
        )


DEFAULT_SET_BY = SetBy()


def error_message(e: openai.APIStatusError) -> str:
    """The server's own words for a refused request, at most 300 characters: the message of an
    error object (`{"error": {"message": ...}}`, vLLM's `{"message": ...}`, FastAPI's
    `{"detail": ...}`), an error that is only text (LM Studio's and Ollama's `{"error": "..."}`),
    or the text of a body that is not JSON (an HTML page from a proxy, its tags left out)."""
    body = e.body
    if isinstance(body, dict):
        inner = body.get("error")
        msg = (
            body.get("message")
            or (inner.get("message") if isinstance(inner, dict) else inner)
            or body.get("detail")
        )
        if msg:
            return str(msg)[:300]
    elif isinstance(body, str) and (text := page_words(body)):
        return text
    return (e.message or "")[:300]


@dataclass(frozen=True)
class Refusal:
    """A request the server refused for good, however it said so (an HTTP status, or an error
    object in a 200): the status it stands for, as the server said it, and its words."""

    status: int
    said: str  # "401", or an error object's code ("invalid_api_key")
    detail: str
    url: str  # the address the request went to
    size: int | None = None  # the request's body in bytes, when known
    out_of_quota: bool = False


def status_error(
    e: openai.APIStatusError, base_url: str, model: str, set_by: SetBy = DEFAULT_SET_BY
) -> ModelError:
    """The error for an HTTP status that retrying did not (or could not) cure."""
    sent = e.request.headers.get("content-length", "")
    refusal = Refusal(
        e.status_code,
        str(e.status_code),
        error_message(e),
        str(e.request.url),
        int(sent) if sent.isdecimal() else None,
        out_of_quota(e),
    )
    return refused(refusal, base_url, model, set_by)


def refused(r: Refusal, base_url: str, model: str, set_by: SetBy = DEFAULT_SET_BY) -> ModelError:
    """The error, with its fix, for a refusal that retrying did not (or could not) cure."""
    status, said, detail = r.status, r.said, r.detail
    if status in (401, 403):
        what = "refused a request sent without a key" if set_by.unsent else "refused the API key"
        return ModelRefused(f"{base_url} {what} ({said}: {detail})", set_by.key_fix())
    if status == 404 and "model" not in detail.lower() and model.lower() not in detail.lower():
        # Not a word of a model: the address itself is not there (a base URL without its
        # /v1, or with it twice), as vLLM's {"detail": "Not Found"} or Ollama's "404 page
        # not found" say.
        return ModelRefused(f"{r.url} was not found ({said}: {detail})", set_by.address_fix())
    if status == 404:
        return ModelRefused(
            f"model {model!r} was not found at {base_url} ({detail})",
            f"set {set_by.model} to a model the endpoint serves; `agent doctor` lists them",
        )
    if status == 413:  # a proxy's body limit (nginx: 1 MB unless raised), or the server's
        size = f" of {r.size:,} bytes" if r.size is not None else ""
        return ModelRefused(
            f"{base_url} refused a request{size} as too large ({said}: {detail})",
            "raise the body limit of the server or of the proxy in front of it (nginx: "
            "client_max_body_size), or set a smaller context_window",
        )
    if r.out_of_quota and set_by.unsent:
        return ModelRefused(
            f"{base_url} says a request sent without a key has no quota ({said}: {detail})",
            set_by.key_fix(),
        )
    if r.out_of_quota:
        return ModelRefused(
            f"{base_url} says the quota of the key sent is used up ({said}: {detail})",
            f"check the plan and billing of the account {set_by.key} belongs to; waiting "
            "does not help",
        )
    if status == 429:
        return ModelError(
            f"{base_url} kept rate-limiting the requests ({detail})",
            "wait a minute and try again (`agent run --resume` goes on with a run already begun)",
        )
    if status >= 500:
        return ModelError(
            f"{base_url} kept failing with {said} ({detail})",
            "the server is in trouble; try again later (`agent run --resume` goes on with a run "
            "already begun)",
        )
    return ModelRefused(
        f"{base_url} rejected the request ({said}: {detail})",
        f"check {set_by.model} and that the server supports function tools",
    )


def _plain_http(base_url: str) -> str:
    """The likelier fix when an https address on this machine or network stays silent: a
    local server (llama.cpp, Ollama, vLLM) speaks plain http and waits on the TLS greeting."""
    from agent_cli.llm.server.locality import is_local

    if not base_url.startswith("https://") or not is_local(base_url):
        return ""
    return (
        f"a local server usually speaks plain http: try {'http://' + base_url[8:]} "
        "(else raise request_timeout_s or check the server's load)"
    )


def convert(
    e: BaseException,
    base_url: str,
    model: str,
    timeout_s: float = 0,
    set_by: SetBy = DEFAULT_SET_BY,
) -> ModelError:
    """Our error for any failure of a model call."""
    if isinstance(e, StreamIdle):
        return ModelError(
            f"{base_url} sent only keep-alive comments and no reply for {timeout_s:g} s",
            "check the server's load (is the request queued?) or raise request_timeout_s",
        )
    if isinstance(e, (openai.APITimeoutError, StreamSilent)):
        waited = f" (nothing for {timeout_s:g} s)" if timeout_s > 0 else ""
        return ModelError(
            f"{set_by.endpoint(base_url)} did not answer in time{waited}",
            _plain_http(base_url) or "raise request_timeout_s or check the server's load",
        )
    if isinstance(e, openai.APIConnectionError):
        wrong = failures.misdirected(e)
        where = f"the {set_by.role} model endpoint" if set_by.role else "the model endpoint"
        if wrong:
            return ModelError(
                f"{where} {base_url} answers, but {wrong}",
                f"{set_by.address_fix()}, and the server answers there itself",
            )
        proxy = proxy_for(base_url)
        if proxy:
            return ModelError(
                f"cannot reach {where} {base_url} through the proxy {proxy}",
                "check the proxy, or leave this host out of it (NO_PROXY)",
            )
        if set_by.role:
            return ModelError(
                f"cannot reach {where} {base_url}",
                f"is the server running? check {set_by.url}; `agent doctor` checks each endpoint",
            )
        return ModelError(
            f"cannot reach {where} {base_url}",
            "is the server running? check the setting that names it (--base-url / "
            "OPENAI_BASE_URL, or a role's *_base_url); `agent doctor` checks each endpoint",
        )
    if isinstance(e, openai.APIStatusError):
        return status_error(e, base_url, model, set_by)
    if isinstance(e, ErrorReply):
        status = 429 if e.out_of_quota else e.code
        if status is not None and status < 500:  # it blames the request: said as that status
            url = f"{base_url.rstrip('/')}/chat/completions"
            said = e.said or str(status)
            refusal = Refusal(status, said, e.message, url, out_of_quota=e.out_of_quota)
            return refused(refusal, base_url, model, set_by)
        return ModelError(
            f"{base_url} answered with an error instead of a reply: {e.message}",
            "see the server's or provider's status and log, then try again (`agent run "
            "--resume` goes on with a run already begun)",
        )
    if isinstance(e, NotJson):
        return ModelError(
            f"{set_by.endpoint(base_url)} answered with a page or text, not a chat completion: "
            f"{e.words!r}",
            f"check that {set_by.url} points at a Chat Completions API (most end in /v1), not "
            "a web page; a proxy or captive portal on the way may want a sign-in (`agent run "
            "--resume` goes on with a run already begun)",
        )
    if isinstance(e, Filtered):
        return ModelError(
            f"the provider's content filter at {set_by.endpoint(base_url)} stopped the model's "
            "reply before it held anything (its finish_reason: content_filter)",
            "the request or the model's reply tripped the provider's filter: reword the goal, "
            "or ask the provider about its filter (`agent run --resume` goes on with a run "
            "already begun)",
        )
    if isinstance(e, (StreamCut, StreamFailed)):
        return ModelError(
            f"{base_url} kept breaking off its replies ({e})",
            "check the server's log, then try again (`agent run --resume` for a run already begun)",
        )
    return ModelError(f"the model call failed: {e}", "run `agent doctor`")


SdkError = openai.OpenAIError  # what any SDK call may raise, for modules that do not import it


def read_failure(e: BaseException, request: Any) -> SdkError | None:
    """A failure met while reading a response's body as the SDK's error for it: a read that
    timed out, or a connection that broke (both retried); None for anything else."""
    if failures.is_timeout(e):
        return openai.APITimeoutError(request=request)
    if failures.is_transport_error(e):
        return openai.APIConnectionError(request=request)
    return None


def out_of_quota(e: openai.APIStatusError) -> bool:
    """Whether a 429 says the account's quota is used up (OpenAI's `insufficient_quota`),
    which no wait cures, rather than that requests came too fast."""
    if e.status_code != 429:
        return False
    body: dict[str, Any] = e.body if isinstance(e.body, dict) else {}
    err = body.get("error")
    inner: dict[str, Any] = err if isinstance(err, dict) else body
    return error_object({**inner, "message": error_message(e)}).out_of_quota


def transient(e: BaseException) -> bool:
    """Whether a failed request may succeed when sent again: the server busy (429, 502, 503,
    504, 520-524, 529), a timeout, or a connection that broke (not one refused, nor sent elsewhere)."""
    if isinstance(e, openai.APIStatusError):
        return e.status_code in failures.BUSY_STATUSES and not out_of_quota(e)
    if isinstance(e, openai.APIConnectionError):  # a timeout is one
        return not failures.refused(e) and not failures.misdirected(e)
    return False


@contextmanager
def converted(
    base_url: str, model: str, timeout_s: float = 0, set_by: SetBy = DEFAULT_SET_BY
) -> Iterator[None]:
    """Raise any SDK failure inside the block as our error, without a retry."""
    try:
        yield
    except openai.OpenAIError as e:
        raise convert(e, base_url, model, timeout_s, set_by) from None


def why(failure: BaseException) -> str:
    """A failure in a few words, for the retry notice."""
    if isinstance(failure, openai.APIStatusError):
        return f"{failure.status_code}: {error_message(failure)}"[:120]
    return (str(failure) or type(failure).__name__)[:120]


def delay(e: BaseException, attempt: int, base: float) -> float:
    """Exponential backoff with jitter, honouring a short Retry-After, in seconds or as an HTTP
    date (one in the past, or negative, is 0; one that is neither is ignored)."""
    response = e.response if isinstance(e, openai.APIStatusError) else None
    retry_after = response.headers.get("retry-after") if response is not None else None
    if retry_after:
        wait = _seconds_until(retry_after)
        if math.isfinite(wait):
            return min(max(wait, 0.0), 30.0)
    return float(min(base * (2**attempt), 30.0) * (0.75 + random.random() / 2))


def _seconds_until(retry_after: str) -> float:
    """A Retry-After value in seconds from now: a number, or an HTTP date; NaN for nonsense."""
    try:
        return float(retry_after)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(retry_after)
    except (TypeError, ValueError, IndexError):
        return math.nan
    if when.tzinfo is None:  # an HTTP date is in GMT
        when = when.replace(tzinfo=datetime.UTC)
    return (when - datetime.datetime.now(datetime.UTC)).total_seconds()


def proxy_for(base_url: str) -> str:
    """The proxy (from the environment: HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY, as the
    HTTP client reads them) that requests to `base_url` go through; "" for none. Shown
    without its user and password."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all") or ""
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return ""
    shown = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return f"{shown.scheme}://{shown.hostname}" + (f":{shown.port}" if shown.port else "")
