"""Metric curves of many runs read straight from MLflow's SQL tables: the fast path of
`history.metric_history`.

MLflow's client builds one `Metric` entity a logged point and asks once a metric: a run
with a 10,000-step curve and 50 single-value metrics took 1.8 s, so comparing 8 such runs
took most of the compare page's 2.6 s (issue 16). Here one query a run reads its
`metrics` rows through the (run_uuid, key, step) index MLflow creates, as plain numbers.
The same rows, in the same order, as the client gives (tests/tracking/test_history.py
compares the two); a tracking server (`http://...`) has no tables to read, so
`history.metric_history` keeps the client's path for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

# the URI schemes (before any `+driver`) whose store is MLflow's SqlAlchemyStore
SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
# in the index's order (ordering by value too would sort every run's rows again: 1.7x the
# query's time); MLflow keeps a NaN as 0 with is_nan set, its entity gives NaN back, so do we
_ROWS = text(
    "SELECT key, step, value, is_nan FROM metrics WHERE run_uuid = :run ORDER BY key, step"
)
# counted on MLflow's (run_uuid, key, step) index alone: no row of the table is read
_COUNTS = text("SELECT key, COUNT(*) FROM metrics WHERE run_uuid = :run GROUP BY key")


def is_sql_store(uri: str) -> bool:
    """Whether `uri` names a database MLflow keeps its runs in (not a tracking server)."""
    return urlsplit(uri).scheme.split("+")[0] in SQL_SCHEMES


@lru_cache(maxsize=16)
def _engine(uri: str) -> Engine:
    # the URI MLflow's own store opens, so the driver it resolves to is MLflow's too
    return create_engine(uri)


def read_curves(
    uri: str, run_ids: list[str], keys: list[str] | None = None
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Every logged value of each run's metrics (or of `keys`), as (step, value) sorted by
    step then value: {run_id: {key: points}}; a run without metrics maps to {}.

    Args:
        uri: the MLflow store's database URI (`is_sql_store(uri)` holds).
        run_ids: the runs, each read by its own indexed query.
        keys: only these metrics (default: all each run has).
    """
    wanted = None if keys is None else set(keys)
    found: dict[str, dict[str, list[tuple[int, float]]]] = {}
    with _engine(uri).connect() as connection:
        for run_id in run_ids:
            rows = connection.execute(_ROWS, {"run": run_id}).all()
            found[run_id] = _by_key(rows, wanted)
    return found


def count_points(uri: str, run_ids: list[str]) -> dict[str, dict[str, int]]:
    """How many values each run has logged of each metric: {run_id: {key: count}}. Rows
    are only ever added, so a changed count is how a reader knows a curve grew."""
    with _engine(uri).connect() as connection:
        return {
            run_id: {str(key): int(n) for key, n in connection.execute(_COUNTS, {"run": run_id})}
            for run_id in run_ids
        }


def _by_key(rows: Sequence[Any], wanted: set[str] | None) -> dict[str, list[tuple[int, float]]]:
    curves: dict[str, list[tuple[int, float]]] = {key: [] for key in wanted or ()}
    for key, group in groupby(rows, itemgetter(0)):
        if wanted is not None and key not in wanted:
            continue
        points = [(int(step), math.nan if nan else float(value)) for _, step, value, nan in group]
        points.sort()  # values of one step by value, as the client's are (sorted: linear)
        curves[key] = points
    # by key in Python's order: a database's collation may sort names otherwise
    return dict(sorted(curves.items()))
