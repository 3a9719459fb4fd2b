"""Search over an opened index: dense, BM25 (SQLite FTS5's bm25()), or hybrid.

Every path reads only live rows that pass the filters: BM25 joins the chunks table, dense
search is limited to the allowed row ids whenever the dense index holds more than the
live, unfiltered rows, and hits are looked up among live rows last of all.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import MissingColumnError, UsageError
from forgeml.rag.fusion import Ranking, convex_combination, reciprocal_rank_fusion
from forgeml.rag.types import SEARCH_MODES, Hit

if TYPE_CHECKING:
    from forgeml.rag.index import Index

import re

_WORD = re.compile(r"\w+", re.UNICODE)
_MIN_DEPTH = 50  # candidates each ranking gives a hybrid fusion


def _filter_sql(index: Index, filters: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    if not filters:
        return "", []
    unknown = sorted(set(filters) - index.fields())
    if unknown:
        raise MissingColumnError(
            f"The index has no field '{unknown[0]}' to filter on "
            f"(its fields: {', '.join(sorted(index.fields()))})."
        )
    clauses, params = [], []
    for key, value in sorted(filters.items()):
        clauses.append("CAST(json_extract(c.metadata, ?) AS TEXT) = ?")
        params += [f'$."{key}"', str(value)]
    return " AND " + " AND ".join(clauses), params


@cache
def _stop_words() -> frozenset[str]:
    """scikit-learn's English stop words (318; bm25s and Lucene use lists like it)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def _bm25(index: Index, query: str, depth: int, where: str, params: list[Any]) -> Ranking:
    words = _WORD.findall(query.lower())
    if not words:
        return []
    # stop words carry almost no weight in BM25 but match nearly every chunk, and FTS5
    # scores every match: at 10k chunks a sentence-long query took 28 ms with them
    words = [word for word in words if word not in _stop_words()] or words
    match = " OR ".join('"' + word.replace('"', '""') + '"' for word in dict.fromkeys(words))
    rows = index.file.db.execute(
        "SELECT c.rowid, bm25(fts) FROM fts JOIN chunks c ON c.rowid = fts.rowid "
        f"WHERE fts MATCH ? AND c.deleted = 0{where} ORDER BY bm25(fts) LIMIT ?",
        [match, *params, depth],
    )
    return [(int(rowid), -float(score)) for rowid, score in rows]


def _dense(index: Index, query: str, depth: int, where: str, params: list[Any]) -> Ranking:
    allowed = None
    if where or index.dense.size != index.file.live_count():
        rows = index.file.db.execute(
            f"SELECT c.rowid FROM chunks c WHERE c.deleted = 0{where}", params
        )
        allowed = {int(rowid) for (rowid,) in rows}
    vector = index.query_vector(query)
    return index.dense.search(vector, depth, allowed)


def search(
    index: Index,
    query: str,
    k: int = 10,
    mode: str = "hybrid",
    filters: Mapping[str, Any] | None = None,
    weight: float | None = None,
) -> list[Hit]:
    """The `k` best chunks for `query`, best first (ties broken by chunk id).

    Args:
        index: the opened index.
        query: free text.
        k: how many hits.
        mode: `hybrid` (default), `dense` or `bm25`.
        filters: metadata field -> value every hit must have (compared as text).
        weight: hybrid only: fuse by the convex combination with this dense weight in
            [0, 1] instead of by reciprocal-rank fusion.

    Raises:
        UsageError: an unknown mode, k < 1, or a weight outside [0, 1].
        MissingColumnError: a filter names a field the index does not have.
    """
    if mode not in SEARCH_MODES:
        raise UsageError(f"Unknown search mode '{mode}': choose one of {', '.join(SEARCH_MODES)}.")
    if k < 1:
        raise UsageError(f"k must be at least 1, not {k}.")
    if weight is not None and not 0.0 <= weight <= 1.0:
        raise UsageError(f"The hybrid weight must lie in [0, 1], not {weight}.")
    where, params = _filter_sql(index, filters)
    if mode == "bm25":
        scores = dict(_bm25(index, query, k, where, params))
    elif mode == "dense":
        scores = dict(_dense(index, query, k, where, params))
    else:
        depth = max(4 * k, _MIN_DEPTH)
        dense, bm25 = (f(index, query, depth, where, params) for f in (_dense, _bm25))
        if weight is None:
            scores = reciprocal_rank_fusion([dense, bm25])
        else:
            scores = convex_combination(dense, bm25, weight)
    return _hits(index, scores, k)


def _hits(index: Index, scores: Mapping[int, float], k: int) -> list[Hit]:
    rows = index.file.rows(list(scores))
    hits = [
        Hit(chunk_id, scores[rowid], text, source, metadata)
        for rowid, (chunk_id, text, source, metadata) in rows.items()
    ]
    hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
    return hits[:k]
