"""Embedder on an OpenAI-compatible /embeddings endpoint."""

from __future__ import annotations

from agent_cli.core.redact import redact
from agent_cli.llm.openai.client import make_client
from agent_cli.llm.openai.errors import SetBy, converted
from agent_cli.llm.wire.vectors import read_vectors


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
    ) -> None:
        self.name = f"openai:{model}"
        self.secrets = secrets  # masked, with the known key shapes, in every text sent
        self.model = model
        self.base_url = base_url
        self._client = make_client(base_url, api_key, timeout_s)
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
        with converted(self.base_url, self.model, set_by=SetBy(model="embedding_model")):
            sent = [redact(t, self.secrets) for t in texts]
            raw = self._client.embeddings.with_raw_response.create(
                model=self.model, input=sent, encoding_format="float"
            ).content
        vectors = read_vectors(raw, len(texts), self._dim, self.base_url)
        self._dim = len(vectors[0])
        return vectors
