"""Fusing the dense and BM25 rankings into one.

Reciprocal-rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): a document's score is
the sum over rankings of 1 / (k + rank), k = 60, rank from 1. The convex combination
min-max normalises each ranking's scores to [0, 1] and adds `weight * dense +
(1 - weight) * bm25` (a ranking that misses a document gives it 0).
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60

Ranking = Sequence[tuple[int, float]]  # (row id, score), best first


def reciprocal_rank_fusion(rankings: Sequence[Ranking], k: int = RRF_K) -> dict[int, float]:
    """RRF scores of every row in any ranking."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (row, _) in enumerate(ranking, start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    return fused


def _normalised(ranking: Ranking) -> dict[int, float]:
    if not ranking:
        return {}
    scores = [score for _, score in ranking]
    low, high = min(scores), max(scores)
    span = high - low
    return {row: (score - low) / span if span > 0 else 1.0 for row, score in ranking}


def convex_combination(dense: Ranking, bm25: Ranking, weight: float) -> dict[int, float]:
    """`weight` * normalised dense score + (1 - `weight`) * normalised BM25 score."""
    dense_scores, bm25_scores = _normalised(dense), _normalised(bm25)
    return {
        row: weight * dense_scores.get(row, 0.0) + (1.0 - weight) * bm25_scores.get(row, 0.0)
        for row in dense_scores.keys() | bm25_scores.keys()
    }
