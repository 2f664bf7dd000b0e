"""Long-term memory's `facts` written and read with chromadb's own client, as another tool, an
older version or a teammate does: what the agent must check rather than trust."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import chromadb
from chromadb.config import Settings


def raw_upsert(store: Path, embedder, records: dict[str, dict[str, Any]], docs: list[str]) -> None:
    """Write `records` (id -> metadata), with `docs` as their documents, into the store's
    `facts`."""
    with chromadb.PersistentClient(str(store), Settings(anonymized_telemetry=False)) as client:
        client.get_collection("facts").upsert(
            ids=list(records),
            embeddings=embedder.embed(docs),
            documents=docs,
            metadatas=list(records.values()),
        )


def raw_metas(store: Path, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The metadata of `ids` in the store's `facts`, as stored."""
    with chromadb.PersistentClient(str(store), Settings(anonymized_telemetry=False)) as client:
        got = client.get_collection("facts").get(ids=ids, include=["metadatas"])
    return dict(zip(got["ids"], got["metadatas"], strict=True))
