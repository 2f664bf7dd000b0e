"""A model endpoint's address: the form settings and saved runs accept, and whether it can be
asked without an API key (OpenAI's own API cannot).

The key is checked before anything is spent: a run's client refuses it (`openai/client.py`),
and a batch checks it once before it starts a run per goal that would each fail the same way.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from agent_cli.core.errors import ConfigError

OPENAI_HOST = "api.openai.com"
EXAMPLE = "http://127.0.0.1:8080/v1"


def endpoint(url: str) -> str:
    """`url` when it is an http(s) address with a host and no credentials in it; else a
    ValueError that says what is expected (`localhost:8080/v1` has no scheme, say)."""
    parts = urlsplit(url)
    try:
        _ = parts.port  # reading it validates it
    except ValueError:
        raise ValueError("the port is not a number between 0 and 65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an endpoint address like {EXAMPLE}")
    if parts.username or parts.password:
        raise ValueError("put the key in OPENAI_API_KEY, not in the endpoint's address")
    return url


def missing_key(base_url: str, api_key: str | None) -> ConfigError | None:
    """The error for asking `base_url` without `api_key`, or None when that is fine."""
    if api_key or OPENAI_HOST not in base_url:
        return None  # local servers (vLLM, Ollama, llama.cpp) accept any key, or none
    return ConfigError(
        "no API key is set for " + base_url,
        "export OPENAI_API_KEY=..., or point --base-url at a local server",
    )
