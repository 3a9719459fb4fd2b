"""The weight of a convex-combination hybrid, tuned on a labelled set.

Hybrid search can fuse a dense and a BM25 ranking by a convex combination of their scores,
each min-max normalised per query: alpha * dense + (1 - alpha) * bm25 (Bruch, Gai and
Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023, find
it beats reciprocal-rank fusion once alpha is tuned on a few queries). `tune_alpha`
grid-searches alpha in [0, 1] for the best mean nDCG@10 over the queries' candidates.
Pure functions: the candidates come from whatever index produced them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from forgeml.core.errors import InvalidDataError, UsageError
from forgeml.rag.fusion import convex_combination, min_max
from forgeml.rag.metrics import NDCG_DEPTH, ndcg_at

__all__ = ["Candidates", "Tuning", "convex_fuse", "min_max", "tune_alpha"]


@dataclass(frozen=True)
class Candidates:
    """One query's candidates: document id -> score from each retriever, and its gold ids."""

    dense: dict[str, float]
    bm25: dict[str, float]
    relevant: frozenset[str]


@dataclass(frozen=True)
class Tuning:
    """The best alpha (the dense score's weight) and mean nDCG@10 at every alpha tried."""

    alpha: float
    ndcg: float
    curve: list[tuple[float, float]]


def convex_fuse(dense: dict[str, float], bm25: dict[str, float], alpha: float) -> list[str]:
    """Ids ranked by alpha * dense + (1 - alpha) * bm25 over min-max normalised scores
    (`forgeml.rag.fusion.convex_combination`, as search fuses); an id missing from one list
    scores 0 there; ties go to the smaller id.

    Raises:
        UsageError: `alpha` is outside [0, 1].
    """
    if not 0.0 <= alpha <= 1.0:
        raise UsageError(f"The hybrid weight alpha must be between 0 and 1; got {alpha}.")
    fused = convex_combination(dense.items(), bm25.items(), alpha)
    return sorted(fused, key=lambda doc_id: (-fused[doc_id], doc_id))


def tune_alpha(candidates: list[Candidates], steps: int = 20) -> Tuning:
    """The alpha in {0, 1/steps, ..., 1} whose fusion has the best mean nDCG@10.

    Among alphas that tie for the best, the one nearest 0.5 wins (the middle of a plateau
    moves least on new queries), then the smaller.

    Args:
        candidates: every query's dense and BM25 candidates with its gold ids.
        steps: how many intervals the grid divides [0, 1] into.

    Raises:
        InvalidDataError: there are no candidates to tune on.
        UsageError: `steps` is below 1.
    """
    if not candidates:
        raise InvalidDataError("There are no queries to tune the hybrid weight on.")
    if steps < 1:
        raise UsageError(f"The alpha grid needs at least 1 step; got {steps}.")
    curve = []
    for step in range(steps + 1):
        alpha = step / steps
        ndcg = math.fsum(
            ndcg_at(convex_fuse(item.dense, item.bm25, alpha), item.relevant, NDCG_DEPTH)
            for item in candidates
        ) / len(candidates)
        curve.append((alpha, ndcg))
    best = max(value for _, value in curve)
    alpha = min(
        (alpha for alpha, value in curve if value == best),
        key=lambda alpha: (round(abs(alpha - 0.5), 9), alpha),  # 1/3 and 2/3 tie
    )
    return Tuning(alpha=alpha, ndcg=best, curve=curve)
