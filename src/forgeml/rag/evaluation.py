"""`rag eval` over an opened index: a labelled set's queries, scored and optionally tuned.

A query's `relevant` ids name what a correct hit is. With `match="source"` (the default)
an id names a source: its full path as the index records it, or a trailing part of that
path (`heapq.md`, `docs/heapq.md`); with `match="chunk"` it names a chunk id. Hits are
ranked as the index returns them, and a source found by several chunks counts once, at
its first rank (`forgeml.rag.metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from forgeml.core.errors import InvalidDataError, UsageError
from forgeml.rag.index import Index
from forgeml.rag.labelled import LabelledSet, Query
from forgeml.rag.metrics import NDCG_DEPTH, Report, Retrieve, evaluate
from forgeml.rag.tuning import Candidates, Tuning, tune_alpha
from forgeml.rag.types import Hit

__all__ = ["MATCHES", "Evaluation", "evaluate_index", "resolve_relevant", "tune_weight"]

MATCHES = ("source", "chunk")  # what a relevant id names
_TUNE_DEPTH = 50  # candidates each retriever gives the weight's grid search


@dataclass(frozen=True)
class Evaluation:
    """The report, and the tuning when the convex weight was tuned (the report then uses it)."""

    report: Report
    mode: str
    weight: float | None
    tuning: Tuning | None = None


def _sources_by_suffix(index: Index) -> dict[str, list[str]]:
    sources: dict[str, list[str]] = {}
    for source in {chunk.source for chunk in index.chunks()}:
        parts = source.replace("\\", "/").split("/")
        for start in range(len(parts)):
            sources.setdefault("/".join(parts[start:]), []).append(source)
    return sources


def resolve_relevant(index: Index, labelled: LabelledSet, match: str) -> LabelledSet:
    """`labelled` with each relevant id replaced by the index's own id for it.

    Raises:
        UsageError: `match` is neither "source" nor "chunk".
        InvalidDataError: a relevant id names nothing in the index, or several sources.
    """
    if match not in MATCHES:
        raise UsageError(f"Unknown match '{match}': choose one of {', '.join(MATCHES)}.")
    if match == "chunk":
        known = {chunk.chunk_id for chunk in index.chunks()}
        missing = sorted({i for q in labelled.queries for i in q.relevant} - known)
        if missing:
            raise InvalidDataError(f"The relevant id '{missing[0]}' is no chunk of the index.")
        return labelled
    sources = _sources_by_suffix(index)
    queries = [replace(q, relevant=_resolved(q, sources)) for q in labelled.queries]
    return replace(labelled, queries=queries)


def _resolved(query: Query, sources: dict[str, list[str]]) -> frozenset[str]:
    resolved = set()
    for item in query.relevant:
        found = sources.get(item.replace("\\", "/").strip("/"), [])
        if not found:
            raise InvalidDataError(f"The relevant id '{item}' names no source of the index.")
        if len(found) > 1:
            raise InvalidDataError(
                f"The relevant id '{item}' matches {len(found)} sources; give more of its path."
            )
        resolved.add(found[0])
    return frozenset(resolved)


def _ids(hits: Sequence[Hit], match: str) -> list[str]:
    return [hit.chunk_id if match == "chunk" else hit.source for hit in hits]


def _best(hits: Sequence[Hit], match: str) -> dict[str, float]:
    scores: dict[str, float] = {}
    for key, hit in zip(_ids(hits, match), hits, strict=True):
        scores[key] = max(scores.get(key, hit.score), hit.score)
    return scores


def tune_weight(index: Index, labelled: LabelledSet, match: str, steps: int = 20) -> Tuning:
    """Grid-search the convex hybrid's dense weight for the best mean nDCG@10.

    Each query's dense and BM25 candidates (the best 50 chunks of each; a source found by
    several chunks keeps its best score) go to `forgeml.rag.tuning.tune_alpha`.
    """
    candidates = [
        Candidates(
            dense=_best(index.search(q.text, _TUNE_DEPTH, "dense"), match),
            bm25=_best(index.search(q.text, _TUNE_DEPTH, "bm25"), match),
            relevant=q.relevant,
        )
        for q in labelled.queries
    ]
    return tune_alpha(candidates, steps)


def evaluate_index(
    index: Index,
    labelled: LabelledSet,
    *,
    k: int = 10,
    mode: str = "hybrid",
    weight: float | None = None,
    match: str = "source",
    tune: bool = False,
) -> Evaluation:
    """recall@k, precision@k, MRR and nDCG@10 of `index` on `labelled`.

    Args:
        index: the opened index version.
        labelled: queries with relevant ids (see the module's docstring for `match`).
        k: the cut-off of recall and precision.
        mode: hybrid, dense or bm25.
        weight: hybrid only: the convex combination's dense weight (default: RRF).
        match: whether relevant ids name sources or chunk ids.
        tune: grid-search the weight first and evaluate the convex hybrid with it.

    Raises:
        UsageError: `tune` with a mode other than hybrid, or with a weight given.
        InvalidDataError: a relevant id names nothing in the index.
    """
    if tune and (mode != "hybrid" or weight is not None):
        raise UsageError("--tune searches the hybrid weight; drop --weight and --mode.")
    labelled = resolve_relevant(index, labelled, match)
    tuning = tune_weight(index, labelled, match) if tune else None
    if tuning is not None:
        weight = tuning.alpha
    chunk_depth = max(k, NDCG_DEPTH) * (1 if match == "chunk" else 4)

    def retrieve(query: str, depth: int) -> list[str]:
        return _ids(index.search(query, max(depth, chunk_depth), mode, None, weight), match)

    runner: Retrieve = retrieve
    return Evaluation(evaluate(runner, labelled, k), mode, weight, tuning)
