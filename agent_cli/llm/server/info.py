"""What a local server says about itself: its context window and whether it is still busy.

Best effort, a short timeout per probe, the probes sent at once, never raising: llama.cpp
`GET /props` (`n_ctx`) and `GET /slots` (`is_processing`), vLLM `GET /v1/models`
(`max_model_len`), Ollama `GET /api/ps` and `POST /api/show` (the loaded context, `num_ctx`,
the model's `*.context_length`). Ollama serves a model with its own `num_ctx` (4096 unless
configured), whatever the model could take, so that is what counts when nothing says more.
An answer of any other shape, or a size past `MAX_WINDOW`, says nothing.
The HTTP itself is the caller's `Fetch` (the model client's, so probes carry the same key,
proxy and TLS settings).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 2.0
MAX_WINDOW = 100_000_000  # tokens; a server that says more is not believed
OLLAMA_DEFAULT_CTX = 4096
SKIP_HOSTS = ("api.openai.com",)

# (absolute URL, JSON body to POST or None to GET, timeout) -> the JSON answer, or None when
# the server answered with an error; raises Unreachable when it cannot be reached at all.
Fetch = Callable[[str, "dict[str, Any] | None", float], Any]


class Unreachable(Exception):
    """The server cannot be reached at all (refused, unknown host): stop asking it."""


def root_of(base_url: str) -> str:
    """`http://host:port` of a base URL (the local servers serve their own API there)."""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def _positive(value: Any) -> int | None:
    """A context size: an int from 1 to MAX_WINDOW; None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_WINDOW:
        return value
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _llama_cpp(fetch: Fetch, base_url: str, model: str) -> int | None:
    props = _dict(fetch(root_of(base_url) + "/props", None, PROBE_TIMEOUT_S))
    nested = _dict(props.get("default_generation_settings")).get("n_ctx")
    return _positive(props.get("n_ctx")) or _positive(nested)


def _vllm(fetch: Fetch, base_url: str, model: str) -> int | None:
    listing = _dict(fetch(base_url.rstrip("/") + "/models", None, PROBE_TIMEOUT_S))
    lengths = [
        (e.get("id"), _positive(e.get("max_model_len")))
        for e in _list(listing.get("data"))
        if isinstance(e, dict)
    ]
    named = next((n for name, n in lengths if name == model and n), None)
    return named or next((n for _, n in lengths if n), None)


def _ollama(fetch: Fetch, base_url: str, model: str) -> int | None:
    root = root_of(base_url)
    running = _dict(fetch(root + "/api/ps", None, PROBE_TIMEOUT_S))
    for entry in _list(running.get("models")):
        named = isinstance(entry, dict) and entry.get("name") in (model, f"{model}:latest")
        if named and (n := _positive(entry.get("context_length"))):
            return n
    shown = fetch(root + "/api/show", {"model": model, "name": model}, PROBE_TIMEOUT_S)
    if not isinstance(shown, dict):
        return None
    for line in str(shown.get("parameters") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "num_ctx" and re.fullmatch(r"[0-9]{1,12}", value.strip()):
            return _positive(int(value.strip()))
    info = _dict(shown.get("model_info"))
    trained = [
        n for k, v in info.items() if str(k).endswith(".context_length") and (n := _positive(v))
    ]
    return min(trained[0], OLLAMA_DEFAULT_CTX) if trained else None


PROBES = (
    ("llama.cpp /props", _llama_cpp),
    ("vLLM /v1/models", _vllm),
    ("Ollama /api/show", _ollama),
)


def learn_context_window(fetch: Fetch, base_url: str, model: str) -> tuple[int, str] | None:
    """(tokens, where it was learned) from the server itself, or None if it does not say or
    cannot be reached (the first request then says so at once, with the how-to-fix)."""
    try:
        return probe_context_window(fetch, base_url, model)
    except Unreachable:
        return None


def probe_context_window(fetch: Fetch, base_url: str, model: str) -> tuple[int, str] | None:
    """As `learn_context_window`, but raising Unreachable when the server is not there.

    The probes are sent at once, each in its own thread (a remote server costs one round
    trip, not four, before the first request), and read in the order of PROBES: the first
    that answers with a size wins, and probes still out are not waited for.
    """
    if any(host in base_url for host in SKIP_HOSTS):
        return None
    pool = ThreadPoolExecutor(max_workers=len(PROBES), thread_name_prefix="probe-window")
    try:
        asked = [(source, pool.submit(probe, fetch, base_url, model)) for source, probe in PROBES]
        for source, answer in asked:
            try:
                n = answer.result()
            except Unreachable:
                raise
            except Exception:  # an answer of a shape no probe expected: it says nothing
                continue
            if n:
                return n, source
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return None


def busy(fetch: Fetch, base_url: str) -> bool | None:
    """Whether the server is generating (llama.cpp `/slots`); None when it does not say."""
    try:
        slots = fetch(root_of(base_url) + "/slots", None, 1.0)
    except Unreachable:
        return None
    if not isinstance(slots, list) or not slots:
        return None
    return any(
        isinstance(s, dict) and (s.get("is_processing") or s.get("state") == 1) for s in slots
    )


def wait_until_idle(fetch: Fetch, base_url: str, max_wait_s: float, poll_s: float = 0.2) -> bool:
    """Wait while the server reports work in progress; False if it is still busy at the end."""
    deadline = time.monotonic() + max_wait_s
    while busy(fetch, base_url):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


FIXED_TOKENS = 1500  # the system prompt, the tools schema, the brief and the task line
JSON_PERCENT = 115  # a request's JSON against its text, in tokens (escaped newlines, quotes)


def fit_window(
    window: int, memory_max: int, tool_output_max: int, reply_max: int
) -> tuple[int, int, int]:
    """Working memory, tool output and reply caps that fit a context window together.

    A request is the system prompt and the tools schema (about 1,150 tokens with the built-in
    tools), the attempt's brief and the task line (a few hundred), working memory, the last
    tool output and the reply. The three that grow get at most 30%, 15% and 25% of the
    window; working memory also no more than what the rest leaves (FIXED_TOKENS for the
    fixed parts; a request is counted as JSON, some 15% more than its text, and so are the
    memory block and the tool output in it), so that in a small window a request with a tool
    output at its cap fits without its memory block being assembled smaller, which would
    change the block from step to step and cost the prompt cache.
    """
    tool_output = min(tool_output_max, max(100, window * 15 // 100))
    reply = min(reply_max, max(256, window // 4))
    room = (window - reply - FIXED_TOKENS) * 100 // JSON_PERCENT - tool_output
    return (
        min(memory_max, max(256, min(window * 30 // 100, room))),
        tool_output,
        reply,
    )
