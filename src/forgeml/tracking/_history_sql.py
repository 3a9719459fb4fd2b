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
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import bindparam, create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import TextClause

if TYPE_CHECKING:
    import numpy as np

# a curve as arrays: steps (int64), values (float64, NaN where MLflow set is_nan)
Arrays = tuple["np.ndarray", "np.ndarray"]

# the URI schemes (before any `+driver`) whose store is MLflow's SqlAlchemyStore
SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
# in the index's order (ordering by value too would sort every run's rows again: 1.7x the
# query's time); MLflow keeps a NaN as 0 with is_nan set, its entity gives NaN back, so do we
_ROWS = text(
    "SELECT key, step, value, is_nan FROM metrics WHERE run_uuid = :run ORDER BY key, step"
)
# one metric's rows, all the (run_uuid, key, step) index's: a chart's curves as plain columns
_KEYS = text("SELECT DISTINCT key FROM metrics WHERE run_uuid = :run")
_CURVE = text(
    "SELECT step, value, is_nan FROM metrics WHERE run_uuid = :run AND key = :key ORDER BY step"
)
# MLflow's one row a run and metric, moved on by each value logged past it (by step, then
# time, then value): a cheap sign that a curve grew (counting its rows read them all)
_LATEST = text(
    "SELECT run_uuid, key, step, timestamp, value, is_nan FROM latest_metrics "
    "WHERE run_uuid IN :runs"
).bindparams(bindparam("runs", expanding=True))


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


def read_curve_arrays(uri: str, run_ids: list[str]) -> dict[str, dict[str, Arrays]]:
    """`read_curves` of every metric of the runs as numpy arrays, (steps, values) sorted by
    step then value: {run_id: {key: arrays}}; a run without metrics maps to {}.

    A chart's first view of 100 runs of 10,000 steps read a million rows: as SQLAlchemy
    rows turned into (step, value) tuples they took 8 s of a loaded 2-core machine (most
    of it making and collecting a million Python objects); the driver's tuples go straight
    into one array a curve here.
    """
    import numpy as np

    row = np.dtype([("step", np.int64), ("value", np.float64), ("is_nan", np.bool_)])
    found: dict[str, dict[str, Arrays]] = {}
    with _engine(uri).connect() as connection:
        for run_id in run_ids:
            curves: dict[str, Arrays] = {}
            for (key,) in _driver_rows(connection, _KEYS, {"run": run_id}):
                rows = _driver_rows(connection, _CURVE, {"run": run_id, "key": key})
                read = np.array(rows, dtype=row)
                steps, values = read["step"], np.where(read["is_nan"], np.nan, read["value"])
                if steps.size > 1 and bool((steps[1:] == steps[:-1]).any()):
                    order = np.lexsort((values, steps))  # values of one step by value
                    steps, values = steps[order], values[order]
                curves[str(key)] = (steps, values)
            found[run_id] = dict(sorted(curves.items()))
    return found


def _driver_rows(
    connection: Connection, statement: TextClause, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """`statement`'s rows as the database driver gives them: plain tuples, without a
    SQLAlchemy `Row` each (a second a million rows)."""
    compiled = statement.compile(dialect=connection.dialect)
    bound: Any = compiled.construct_params(params)
    if compiled.positional:  # `?` or `%s` markers: the values in their order
        bound = tuple(bound[name] for name in compiled.positiontup or ())
    cursor = connection.connection.cursor()
    try:
        cursor.execute(str(compiled), bound)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def latest_points(uri: str, run_ids: list[str]) -> dict[str, dict[str, tuple[Any, ...]]]:
    """Each run's latest value of each metric as MLflow keeps it, (step, timestamp, value,
    is_nan) by key: {run_id: {key: latest}}. A value logged past it moves it; one logged
    behind it (an earlier step, after later ones) does not."""
    found: dict[str, dict[str, tuple[Any, ...]]] = {run_id: {} for run_id in run_ids}
    with _engine(uri).connect() as connection:
        for run_id, key, *latest in connection.execute(_LATEST, {"runs": run_ids}):
            found[run_id][str(key)] = tuple(latest)
    return found


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
