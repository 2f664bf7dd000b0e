"""A deterministic embedder for tests: a real implementation of the Embedder protocol."""

from __future__ import annotations

import math
import re
import zlib


class HashEmbedder:
    """Bag of words hashed into buckets with crc32 (stable across processes), unit length.

    Counts the texts it embedded, so tests can see when embedding happens.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"
        self.texts = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            for word in re.findall(r"[a-z]+", text.lower()):
                vec[zlib.crc32(word.encode()) % self.dim] += 1.0
            norm = math.sqrt(sum(x * x for x in vec)) or 1.0
            out.append([x / norm for x in vec])
        return out
