"""Retrieval metrics over a labelled set: recall@k, precision@k, MRR and nDCG@10.

Relevance is binary (a document is in a query's gold set or not). nDCG follows
Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR techniques", ACM TOIS 20(4),
2002: DCG@n = sum over ranks i <= n of rel_i / log2(i + 1), divided by the DCG of the ideal
ranking (every relevant document first), so a perfect ranking scores 1.

A ranking may name one document several times (a retriever that returns chunks reports
each chunk's source): only its first appearance counts, as a reader would see it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from forgeml.core.errors import InvalidDataError, UsageError
from forgeml.rag.labelled import LabelledSet

__all__ = [
    "NDCG_DEPTH",
    "QueryRow",
    "Report",
    "Retrieve",
    "evaluate",
    "metric_names",
    "ndcg_at",
    "precision_at",
    "recall_at",
    "reciprocal_rank",
    "score",
]

NDCG_DEPTH = 10
Retrieve = Callable[[str, int], Sequence[str]]
"""A retriever under test: (query, k) -> ids of the documents found, best first."""


def _unique(ranked: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def recall_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """The share of `relevant` found in the first `k` of `ranked`."""
    if not relevant:
        return 0.0
    return len(relevant.intersection(_unique(ranked)[:k])) / len(relevant)


def precision_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """The share of the first `k` ranks that hold a relevant document (an empty rank counts
    as not relevant, so a retriever cannot gain by returning fewer)."""
    return len(relevant.intersection(_unique(ranked)[:k])) / k


def reciprocal_rank(ranked: Sequence[str], relevant: frozenset[str]) -> float:
    """1 / the rank of the first relevant document in `ranked`; 0 when none is there."""
    for rank, doc_id in enumerate(_unique(ranked), 1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: frozenset[str], k: int = NDCG_DEPTH) -> float:
    """Binary-relevance nDCG of the first `k` of `ranked` (Järvelin & Kekäläinen 2002)."""
    gain = sum(
        1.0 / math.log2(rank + 1)
        for rank, doc_id in enumerate(_unique(ranked)[:k], 1)
        if doc_id in relevant
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), k) + 1))
    return gain / ideal if ideal else 0.0


@dataclass(frozen=True)
class QueryRow:
    """One query's result: what was retrieved and its metrics."""

    query_id: str
    ranked: list[str]
    metrics: dict[str, float]


@dataclass(frozen=True)
class Report:
    """Per-metric means over every query of a set, and each query's row."""

    k: int
    means: dict[str, float]
    rows: list[QueryRow]

    def below(self, minimums: dict[str, float]) -> dict[str, float]:
        """The metrics whose mean is under its minimum (a gate passes when this is empty).

        Raises:
            UsageError: a minimum names a metric the report does not have.
        """
        unknown = sorted(set(minimums) - set(self.means))
        if unknown:
            raise UsageError(
                f"Unknown metric {unknown[0]!r}; choose from {', '.join(sorted(self.means))}."
            )
        return {
            name: self.means[name] for name, least in minimums.items() if self.means[name] < least
        }


def metric_names(k: int) -> list[str]:
    """The names of the metrics `evaluate` reports for cut-off `k`."""
    return [f"recall@{k}", f"precision@{k}", "mrr", f"ndcg@{NDCG_DEPTH}"]


def score(ranked: Sequence[str], relevant: frozenset[str], k: int) -> dict[str, float]:
    """Every metric of one ranking, keyed as `metric_names(k)`."""
    recall, precision, mrr, ndcg = metric_names(k)
    return {
        recall: recall_at(ranked, relevant, k),
        precision: precision_at(ranked, relevant, k),
        mrr: reciprocal_rank(_unique(ranked)[: max(k, NDCG_DEPTH)], relevant),
        ndcg: ndcg_at(ranked, relevant, NDCG_DEPTH),
    }


def evaluate(retrieve: Retrieve, labelled: LabelledSet, k: int = 10) -> Report:
    """Run every query of `labelled` through `retrieve` and score the rankings.

    Each query asks for max(k, 10) documents, so nDCG@10 is measured whatever `k`; MRR
    looks at the same depth.

    Args:
        retrieve: the retriever under test, (query, n) -> ranked document ids.
        labelled: the queries and their gold ids.
        k: the cut-off of recall and precision.

    Returns:
        The means of `metric_names(k)` and one row per query.

    Raises:
        UsageError: `k` is below 1.
        InvalidDataError: the set holds no queries.
    """
    if k < 1:
        raise UsageError(f"k must be at least 1; got {k}.")
    if not labelled.queries:
        raise InvalidDataError(f"The labelled set {labelled.name!r} holds no queries.")
    depth = max(k, NDCG_DEPTH)
    rows = []
    for query in labelled.queries:
        ranked = list(retrieve(query.text, depth))
        rows.append(QueryRow(query.id, ranked, score(ranked, query.relevant, k)))
    means = {
        name: math.fsum(row.metrics[name] for row in rows) / len(rows) for name in metric_names(k)
    }
    return Report(k=k, means=means, rows=rows)
