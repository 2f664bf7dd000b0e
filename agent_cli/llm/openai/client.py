"""The openai SDK client for an endpoint, with the SDK's own retries off (ours are in chat.py)."""

from __future__ import annotations

import openai

from agent_cli.core.errors import ConfigError

OPENAI_HOST = "api.openai.com"


def make_client(base_url: str, api_key: str | None, timeout_s: float) -> openai.OpenAI:
    """A client for `base_url`; ConfigError when OpenAI's own API is asked without a key."""
    if not api_key and OPENAI_HOST in base_url:
        raise ConfigError(
            "no API key is set for " + base_url,
            "export OPENAI_API_KEY=..., or point --base-url at a local server",
        )
    # Local servers (vLLM, Ollama, llama.cpp) accept any key; the SDK insists on one.
    return openai.OpenAI(
        base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
    )
