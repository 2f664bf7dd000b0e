"""Whether an endpoint can be asked without an API key: OpenAI's own API cannot.

Said before anything is spent: a run's client refuses it (`openai/client.py`), and a batch
checks it once before it starts a run per goal that would each fail the same way.
"""

from __future__ import annotations

from agent_cli.core.errors import ConfigError

OPENAI_HOST = "api.openai.com"


def missing_key(base_url: str, api_key: str | None) -> ConfigError | None:
    """The error for asking `base_url` without `api_key`, or None when that is fine."""
    if api_key or OPENAI_HOST not in base_url:
        return None  # local servers (vLLM, Ollama, llama.cpp) accept any key, or none
    return ConfigError(
        "no API key is set for " + base_url,
        "export OPENAI_API_KEY=..., or point --base-url at a local server",
    )
