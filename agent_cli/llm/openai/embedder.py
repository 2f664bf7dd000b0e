"""Embedder on an OpenAI-compatible /embeddings endpoint.

A busy answer (429, 502, 503, 504, 520-524, 529), a timeout or a connection broken mid-answer
is asked again with backoff (honouring a short Retry-After), up to `max_retries` times, as a chat
request is; a refused connection, an unknown host and any other refusal fail at once. The
commands give it a chat request's settings: `request_timeout_s`, `max_retries`, `retry_backoff_s`.
An exchange is ended after TOTAL_TIMEOUTS request timeouts in all, and its body read up to a
bound for the texts sent (BYTES_PER_TEXT each), as a chat reply is bounded.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from agent_cli.core.errors import ModelError
from agent_cli.core.redact import redact
from agent_cli.llm.openai import errors
from agent_cli.llm.openai.client import make_client
from agent_cli.llm.openai.deadline import ended_after
from agent_cli.llm.openai.errors import SetBy
from agent_cli.llm.wire.vectors import read_vectors

SET_BY = SetBy(model="embedding_model")
TOTAL_TIMEOUTS = 30  # an answer may take this many request timeouts in all, as a chat reply
# An answer is read up to this much per text, and a megabyte: a vector of 3,072 dimensions
# written as JSON takes some 70 KB, so no answer the store can use is larger.
BYTES_PER_TEXT = 256 * 2**10


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
        total_timeout_s: float | None = None,
    ) -> None:
        self.name = f"openai:{model}"
        self.secrets = secrets  # masked, with the known key shapes, in every text sent
        self.model = model
        self.base_url = base_url
        self._connect = partial(make_client, base_url, api_key, timeout_s)
        self._client = self._connect()
        self._timeout_s = timeout_s
        self._total_s = total_timeout_s or TOTAL_TIMEOUTS * timeout_s
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
                return self._once(sent)
            except errors.SdkError as e:
                attempt += 1
                if not errors.transient(e) or attempt > self._max_retries:
                    raise self._convert(e) from None
                time.sleep(errors.delay(e, attempt - 1, self._backoff_s))

    def _once(self, sent: list[str]) -> bytes:
        """One exchange's body, ended at `total_timeout_s` wherever it is (the read timeout
        starts again with every byte, so a trickle would keep it going) and at
        BYTES_PER_TEXT for each text (an endless body would fill the memory)."""
        too_long = ModelError(
            f"{self.base_url}/embeddings: the answer went on for over {self._total_s:g} s, so "
            "the request was ended",
            f"the bound is {TOTAL_TIMEOUTS} times request_timeout_s: raise it, or check the "
            "server's load",
        )
        with (
            ended_after(self._total_s, self._client.close, self._reopen, lambda: too_long),
            self._client.embeddings.with_streaming_response.create(
                model=self.model, input=sent, encoding_format="float"
            ) as response,
        ):
            return self._read(response, 2**20 + BYTES_PER_TEXT * len(sent))

    def _reopen(self) -> None:
        """A new client, for one a deadline closed under its exchange (deadline.py)."""
        self._client = self._connect()

    def _read(self, response: Any, cap: int) -> bytes:
        """The body, up to `cap` bytes; a read that breaks or stalls as the SDK's error for it
        (retried as a timeout or a broken connection is)."""
        body = bytearray()
        try:
            for piece in response.iter_bytes():
                body += piece
                if len(body) > cap:
                    raise ModelError(
                        f"{self.base_url}/embeddings answered with more than {cap >> 20} MB "
                        "for the texts sent, so the request was ended",
                        "check that embedding_model names an embedding model the endpoint serves",
                    )
        except (ModelError, errors.SdkError):
            raise
        except Exception as e:
            failure = errors.read_failure(e, response.http_request)
            if failure is None:
                raise
            raise failure from None
        return bytes(body)

    def _convert(self, e: BaseException) -> ModelError:
        return errors.convert(e, self.base_url, self.model, self._timeout_s, SET_BY)
