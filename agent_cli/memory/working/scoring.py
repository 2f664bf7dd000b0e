"""How much an item matters to the current goal: five terms, no model call.

score = kind weight + references + goal similarity + recency - size

- kind weight: KIND_WEIGHTS below.
- references: REFS_WEIGHT * log1p(n), n = later items that mention a name this item defines.
- goal similarity: GOAL_WEIGHT * cosine(item vector, goal vector); 0 without an embedder.
- recency: FRESH_WEIGHT * 0.5 ** (age / FRESH_HALF_LIFE_STEPS)
           + RECENCY_WEIGHT * 0.5 ** (age / HALF_LIFE_STEPS), age = steps since added or touched.
- size: SIZE_WEIGHT * log2(1 + tokens / 64).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from operator import mul
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

KIND_WEIGHTS: dict[str, float] = {
    "edit": 3.0,
    "note": 2.5,
    "recalled": 2.0,
    "file": 1.5,
    "test_result": 1.0,
    "tool_output": 0.8,
    "log": 0.5,
}
# Chosen with bench/working_memory.py: references order items of like age and kind; they should
# not let an old, much-mentioned edit push out the latest ones.
REFS_WEIGHT = 0.25
GOAL_WEIGHT = 1.0
# Two decays: a fresh boost that lets a new result outrank older edits for a few steps, and a
# slow one that keeps newer work ahead of older work of the same kind.
FRESH_WEIGHT = 2.0
FRESH_HALF_LIFE_STEPS = 2.0
RECENCY_WEIGHT = 3.0
HALF_LIFE_STEPS = 250.0
SIZE_WEIGHT = 0.25


def check_kind(kind: str) -> float:
    """The base weight of `kind`; ValueError naming the known kinds if there is none."""
    try:
        return KIND_WEIGHTS[kind]
    except (KeyError, TypeError):
        known = ", ".join(KIND_WEIGHTS)
        raise ValueError(f"unknown memory item kind {kind!r}; use one of: {known}") from None


def refs_term(refs: int) -> float:
    """The references term for `refs` later mentions."""
    return REFS_WEIGHT * math.log1p(refs)


def recency_term(age: int) -> float:
    """The recency term for an item last added or touched `age` steps ago."""
    age = max(age, 0)
    fresh: float = 0.5 ** (age / FRESH_HALF_LIFE_STEPS)
    slow: float = 0.5 ** (age / HALF_LIFE_STEPS)
    return FRESH_WEIGHT * fresh + RECENCY_WEIGHT * slow


RECENT = [recency_term(age) for age in range(4096)]  # recency_term(age) of the usual ages


def recency(age: int) -> float:
    """recency_term(age), looked up for the ages most items have."""
    return RECENT[age] if 0 <= age < 4096 else recency_term(age)


def size_term(tokens: int) -> float:
    """The size penalty (a positive number, subtracted) for an item of `tokens` tokens."""
    return SIZE_WEIGHT * math.log2(1 + tokens / 64)


def goal_term(vector: Sequence[float] | None, goal: Sequence[float] | None) -> float:
    """The goal term: weighted cosine of two unit vectors, 0 when either is missing."""
    if not vector or not goal or len(vector) != len(goal):
        return 0.0
    cosine: float = sum(map(mul, vector, goal))
    return GOAL_WEIGHT * cosine


def static_score(kind: str, refs: int, goal: float, tokens: int) -> float:
    """Every term but recency, which is the only one that changes with the step."""
    # refs_term() and size_term() written out: this runs on every add()
    return (
        KIND_WEIGHTS[kind]
        + REFS_WEIGHT * math.log1p(refs)
        + goal
        - SIZE_WEIGHT * math.log2(1 + tokens / 64)
    )


def explain(kind: str, refs: int, goal: float, age: int, tokens: int) -> dict[str, float]:
    """Each term of the score and their total (size is the penalty, subtracted)."""
    terms = {
        "kind": KIND_WEIGHTS[kind],
        "refs": refs_term(refs),
        "goal": goal,
        "recency": recency_term(age),
        "size": size_term(tokens),
    }
    terms["total"] = (
        terms["kind"] + terms["refs"] + terms["goal"] + terms["recency"] - terms["size"]
    )
    return terms


def normalise(vector: Sequence[float]) -> tuple[float, ...]:
    """`vector` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        return tuple(float(x) for x in vector)
    return tuple(float(x) / norm for x in vector)


class VectorIndex:
    """Unit vectors of cold items, searched by cosine; numpy is imported on the first search."""

    def __init__(self, rows: Iterable[tuple[str, int, Sequence[float]]] = ()) -> None:
        self._ids: list[str] = []
        self._steps: list[int] = []
        self._where: dict[str, int] = {}
        self._pending: list[Sequence[float]] = []
        self._matrix: NDArray[np.float32] | None = None
        self.dim: int | None = None
        for item_id, step_evicted, vector in rows:
            self.put(item_id, vector, step_evicted)

    def put(self, item_id: str, vector: Sequence[float] | None, step_evicted: int) -> None:
        """Add a cold item's vector, or update when it was evicted if it is already here."""
        if item_id in self._where:
            self._steps[self._where[item_id]] = step_evicted
            return
        if not vector or (self.dim is not None and len(vector) != self.dim):
            return  # written by another embedder: it cannot be compared
        self.dim = len(vector)
        self._where[item_id] = len(self._ids)
        self._ids.append(item_id)
        self._steps.append(step_evicted)
        self._pending.append(vector)

    def search(
        self,
        query: Sequence[float],
        k: int,
        allow: Callable[[str, int], bool],
        min_similarity: float,
    ) -> list[tuple[str, float]]:
        """Up to `k` (id, cosine) pairs, best first, that `allow(id, step_evicted)` accepts."""
        if not self._ids or len(query) != self.dim or k <= 0:
            return []
        import numpy as np

        matrix = self._rows()
        sims = matrix @ np.asarray(query, dtype=np.float32)
        # Sort a short list of the best; a longer one only while too many of those are not allowed.
        shortlist = 4 * k + 32
        while True:
            shortlist = min(shortlist, len(sims))
            order = np.argpartition(-sims, shortlist - 1)[:shortlist]
            order = order[np.argsort(-sims[order], kind="stable")]
            found = self._accept(sims, order, k, allow, min_similarity)
            if len(found) == k or shortlist == len(sims) or sims[order[-1]] < min_similarity:
                return found
            shortlist *= 8

    def _rows(self) -> NDArray[np.float32]:
        """The matrix of all vectors, pending ones appended into spare capacity."""
        import numpy as np

        matrix = self._matrix
        if self._pending:
            rows = np.asarray(self._pending, dtype=np.float32)  # ranking needs no more
            size = len(self._ids) - len(rows)
            if matrix is None or len(matrix) < len(self._ids):
                grown = np.empty((max(2 * len(self._ids), 64), len(rows[0])), dtype=np.float32)
                if matrix is not None:
                    grown[:size] = matrix[:size]
                matrix = self._matrix = grown
            matrix[size : len(self._ids)] = rows
            self._pending = []
        if matrix is None:  # nothing was ever put
            return np.empty((0, self.dim or 0), dtype=np.float32)
        return matrix[: len(self._ids)]

    def _accept(
        self,
        sims: NDArray[np.float32],
        order: NDArray[np.intp],
        k: int,
        allow: Callable[[str, int], bool],
        min_similarity: float,
    ) -> list[tuple[str, float]]:
        """The first `k` rows of `order` above `min_similarity` that `allow` accepts."""
        found: list[tuple[str, float]] = []
        for row in order:
            if sims[row] < min_similarity or len(found) == k:
                break
            if allow(self._ids[row], self._steps[row]):
                found.append((self._ids[row], float(sims[row])))
        return found
