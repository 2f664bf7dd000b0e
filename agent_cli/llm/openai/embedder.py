"""Embedder on an OpenAI-compatible /embeddings endpoint.

A busy answer (429, 502, 503, 504), a timeout or a connection broken mid-answer is asked
again with backoff (honouring a short Retry-After), up to `max_retries` times, as a chat
request is; a refused connection, an unknown host and any other refusal fail at once. The
commands give it a chat request's settings: `request_timeout_s`, `max_retries`, `retry_backoff_s`.
"""

from __future__ import annotations

import time

from agent_cli.core.errors import ModelError
from agent_cli.core.redact import redact
from agent_cli.llm.openai import errors
from agent_cli.llm.openai.client import make_client
from agent_cli.llm.openai.errors import SetBy
from agent_cli.llm.wire.vectors import read_vectors

SET_BY = SetBy(model="embedding_model")


class OpenAIEmbedder:
    """Embedder on an OpenAI-compatible /embeddings endpoint."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float = 60.0,
        secrets: tuple[str, ...] = (),
        max_retries: int = 4,
        backoff_s: float = 1.0,
    ) -> None:
        self.name = f"openai:{model}"
        self.secrets = secrets  # masked, with the known key shapes, in every text sent
        self.model = model
        self.base_url = base_url
        self._client = make_client(base_url, api_key, timeout_s)
        self._timeout_s = timeout_s
        self._max_retries, self._backoff_s = max_retries, backoff_s
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """Vector length, learned from one call on first use."""
        if self._dim is None:
            self._dim = len(self.embed(["dimension probe"])[0])
        return self._dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; ModelError when the endpoint sends anything else
        (wire/vectors.py). Asked for as floats: the body is read by us, not the SDK."""
        if not texts:
            return []
        sent = [redact(t, self.secrets) for t in texts]
        vectors = read_vectors(self._ask(sent), len(texts), self._dim, self.base_url)
        self._dim = len(vectors[0])
        return vectors

    def _ask(self, sent: list[str]) -> bytes:
        """The body of a successful answer, retried as the module docstring says."""
        attempt = 0
        while True:
            try:
                return self._client.embeddings.with_raw_response.create(
                    model=self.model, input=sent, encoding_format="float"
                ).content
            except errors.SdkError as e:
                attempt += 1
                if not errors.transient(e) or attempt > self._max_retries:
                    raise self._convert(e) from None
                time.sleep(errors.delay(e, attempt - 1, self._backoff_s))

    def _convert(self, e: BaseException) -> ModelError:
        return errors.convert(e, self.base_url, self.model, self._timeout_s, SET_BY)
