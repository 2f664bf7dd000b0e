"""How close a memory must be to be recalled into a run, for each kind of embedder.

`SEED` is the seeds' rule (001: associate takes the top 3 above cosine 0.78; 003: episodes
within cosine distance 0.5), kept for an endpoint's embedding model. `OFFLINE` is what
bench/thresholds.py measured for the shipped WordLlama embedder, whose similarities run lower:
at the seed's values it recalls almost nothing of this project's own related pairs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """The associate rule (top `associate_k` above `associate_min_score`) and the episodes'
    floor (cosine distance at most `episode_max_distance`)."""

    associate_k: int
    associate_min_score: float
    episode_max_distance: float

    @property
    def episode_min_score(self) -> float:
        """The episodes' floor as a cosine similarity (1 - distance), as recall scores them."""
        return round(1.0 - self.episode_max_distance, 6)


SEED = Thresholds(associate_k=3, associate_min_score=0.78, episode_max_distance=0.5)
OFFLINE = Thresholds(associate_k=10, associate_min_score=0.2, episode_max_distance=0.75)


def resolve(
    offline: bool,
    associate_k: int | None = None,
    associate_min_score: float | None = None,
    episode_max_distance: float | None = None,
) -> Thresholds:
    """The defaults of the embedder in use (`offline`: WordLlama), with each value set kept."""
    base = OFFLINE if offline else SEED
    return Thresholds(
        associate_k=base.associate_k if associate_k is None else associate_k,
        associate_min_score=(
            base.associate_min_score if associate_min_score is None else associate_min_score
        ),
        episode_max_distance=(
            base.episode_max_distance if episode_max_distance is None else episode_max_distance
        ),
    )
