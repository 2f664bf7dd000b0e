"""The offline embedder for memory: WordLlama, loaded from its own wheel with downloads off.

Chroma's own default embedding function downloads an ONNX model on first use, so the
store always receives vectors from an Embedder instead: this one, or the endpoint's
/embeddings (`cli.shared.make_embedder` chooses; both meet `protocols.Embedder`). Heavy imports happen on first use.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

from agent_cli.core.errors import ConfigError

WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIM = 256
# characters of a text that are embedded: WordLlama keeps every token of a text in memory
# (a 7.5 MB text took 3.4 GB), and the opening of a long text carries what it is about
EMBED_CHARS = 32_000


_LOADING = threading.Lock()


def _load_wordllama() -> Any:
    """The WordLlama model, loaded once whichever threads ask for it at the same time."""
    with _LOADING:
        return _load_wordllama_once()


@functools.lru_cache(maxsize=1)
def _load_wordllama_once() -> Any:
    """The WordLlama model from the files inside its wheel, never from the network."""
    from pathlib import Path

    # wordllama calls logging.basicConfig(level=INFO) on import, which would print every INFO
    # record of every library (httpx's requests among them) on stderr, from any thread, until
    # undone. basicConfig does nothing while the root logger has a handler: give it one.
    root = logging.getLogger()
    guard = logging.NullHandler()
    if not root.handlers:
        root.addHandler(guard)
    try:
        import wordllama
    finally:
        root.removeHandler(guard)
    try:
        return wordllama.WordLlama.load(
            config=WORDLLAMA_CONFIG,
            dim=WORDLLAMA_DIM,
            cache_dir=Path(wordllama.__file__).parent,
            disable_download=True,
        )
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"the offline embedder could not load: {e}", "reinstall wordllama==0.4.0.post1"
        ) from None


class WordLlamaEmbedder:
    """WordLlama l2_supercat, 256 dimensions, unit-length vectors; the model loads on first use."""

    name = f"wordllama:{WORDLLAMA_CONFIG}-{WORDLLAMA_DIM}"
    dim = WORDLLAMA_DIM

    def warm(self) -> None:
        """Load the model now (a worker thread does, while a run starts)."""
        _load_wordllama()

    def embed_array(self, texts: list[str]) -> Any:
        """The vectors as one float32 numpy array (rows of zeros for texts without words)."""
        import numpy as np

        model = _load_wordllama()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            vectors = model.embed([text[:EMBED_CHARS] for text in texts], norm=True)
        return np.nan_to_num(vectors, copy=False)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors
