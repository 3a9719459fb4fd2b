"""Fusing the dense and BM25 rankings into one.

Reciprocal-rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): a document's score is
the sum over rankings of 1 / (k + rank), k = 60, rank from 1. The convex combination
min-max normalises each ranking's scores to [0, 1] and adds `weight * dense +
(1 - weight) * bm25` (a ranking that misses a document gives it 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

RRF_K = 60

Ranking = Sequence[tuple[int, float]]  # (row id, score), best first
Id = TypeVar("Id", int, str)  # a chunk's row id in search, a document id in tuning


def reciprocal_rank_fusion(rankings: Sequence[Ranking], k: int = RRF_K) -> dict[int, float]:
    """RRF scores of every row in any ranking."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (row, _) in enumerate(ranking, start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    return fused


def min_max(scores: Mapping[Id, float]) -> dict[Id, float]:
    """Scores rescaled to [0, 1] by the list's own minimum and maximum; when all are equal,
    every one is 1 (each is as good as the list's best)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def convex_combination(
    dense: Iterable[tuple[Id, float]], bm25: Iterable[tuple[Id, float]], weight: float
) -> dict[Id, float]:
    """`weight` * normalised dense score + (1 - `weight`) * normalised BM25 score."""
    dense_scores, bm25_scores = min_max(dict(dense)), min_max(dict(bm25))
    return {
        key: weight * dense_scores.get(key, 0.0) + (1.0 - weight) * bm25_scores.get(key, 0.0)
        for key in dense_scores.keys() | bm25_scores.keys()
    }
