"""The openai SDK client for an endpoint, with the SDK's own retries off (ours are in chat.py)."""

from __future__ import annotations

import openai

from agent_cli.llm.endpoints import missing_key


def make_client(base_url: str, api_key: str | None, timeout_s: float) -> openai.OpenAI:
    """A client for `base_url`; ConfigError when OpenAI's own API is asked without a key."""
    error = missing_key(base_url, api_key)
    if error is not None:
        raise error
    # Local servers (vLLM, Ollama, llama.cpp) accept any key; the SDK insists on one.
    return openai.OpenAI(
        base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
    )
