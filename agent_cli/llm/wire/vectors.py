"""Reading what an `/embeddings` endpoint sends: one vector per text, checked before use.

A body is parsed strictly (`agent_cli.core.strictjson`, so `NaN` is refused) and must hold,
under `data`, exactly one vector per text sent, each a list of finite numbers of one length
(the length the endpoint gave before, when it gave one). Anything else (an error object, an
HTML page, an empty list, nulls, a vector of another length) is a `ModelError` that says what
was wrong, never an internal error later in memory.
"""

from __future__ import annotations

import math
from typing import Any

from agent_cli.core import strictjson
from agent_cli.core.errors import ModelError

HINT = (
    "check that embedding_model names an embedding model the endpoint serves, and that "
    "the base URL is an OpenAI-compatible /embeddings API"
)


def read_vectors(raw: bytes, count: int, dim: int | None, base_url: str) -> list[list[float]]:
    """The `count` vectors in an embeddings body, in input order; ModelError if it holds no such
    thing (`dim`: the length every vector must have, when it is known)."""

    def bad(why: str) -> ModelError:
        return ModelError(f"{base_url}/embeddings answered with {why}", HINT)

    try:
        body = strictjson.loads(raw)
    except ValueError as e:
        raise bad(f"a body that is not usable JSON: {e}") from None
    if not isinstance(body, dict):
        raise bad("a body that is not a JSON object")
    err = body.get("error")
    if err:
        message = err.get("message") if isinstance(err, dict) else err
        raise bad(f"an error instead of vectors: {str(message or err)[:300]}")
    data = body.get("data")
    if not isinstance(data, list) or len(data) != count:
        got = _many(len(data), "vector") if isinstance(data, list) else "no list of vectors"
        raise bad(f"{got} for {_many(count, 'text')}")
    indices = [_index(row) for row in data]
    if None not in indices:  # in `index` order (a stable sort: repeated indices keep theirs)
        data = [data[i] for i in sorted(range(count), key=lambda i: indices[i] or 0)]
    vectors = []
    for row in data:
        vector = _vector(row)
        if vector is None:
            raise bad("a vector that is not a list of finite numbers")
        vectors.append(vector)
    lengths = {len(v) for v in vectors}
    if 0 in lengths or len(lengths) > 1 or (dim is not None and lengths != {dim}):
        sizes = ", ".join(str(n) for n in sorted(lengths))
        was = f" (it gave {dim} before)" if dim is not None else ""
        raise bad(f"vectors of {sizes} dimensions{was}")
    return vectors


def _many(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def _index(row: Any) -> int | None:
    index = row.get("index") if isinstance(row, dict) else None
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def _vector(row: Any) -> list[float] | None:
    values = row.get("embedding") if isinstance(row, dict) else None
    if not isinstance(values, list):
        return None
    if not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in values
    ):
        return None
    return [float(x) for x in values]
