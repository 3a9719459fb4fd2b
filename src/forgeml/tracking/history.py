"""Metric curves of runs, read back from MLflow (for `forgeml runs compare` and the web UI's
charts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.exc import DBAPIError

from forgeml.tracking._history_sql import (
    Arrays,
    is_sql_store,
    latest_points,
    read_curve_arrays,
    read_curves,
)
from forgeml.tracking._mlflow import open_client, tracking_uri

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

Found = TypeVar("Found")


def metric_history(
    workspace: Workspace, run_id: str, keys: list[str] | None = None
) -> dict[str, list[tuple[int, float]]]:
    """Every logged value of each metric of a run, as (step, value) sorted by step.

    Args:
        workspace: whose MLflow holds the run.
        run_id: the run.
        keys: only these metrics (default: all the run has).
    """
    return metric_histories(workspace, [run_id], keys)[run_id]


def metric_histories(
    workspace: Workspace, run_ids: list[str], keys: list[str] | None = None
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """`metric_history` of several runs: {run_id: {key: points}}. A SQL store is read
    directly (`_history_sql`); a tracking server through MLflow's client.

    Args:
        workspace: whose MLflow holds the runs.
        run_ids: the runs.
        keys: only these metrics (default: all each run has).
    """
    uri = tracking_uri(workspace.settings)
    if is_sql_store(uri):
        return _read_tables(workspace, lambda: read_curves(uri, run_ids, keys))
    return {run_id: client_history(workspace, run_id, keys) for run_id in run_ids}


def metric_arrays(workspace: Workspace, run_ids: list[str]) -> dict[str, dict[str, Arrays]]:
    """`metric_histories` of every metric of the runs as numpy arrays (steps, values): what
    a chart downsamples, without a Python tuple a point (`_history_sql.read_curve_arrays`)."""
    uri = tracking_uri(workspace.settings)
    if is_sql_store(uri):
        return _read_tables(workspace, lambda: read_curve_arrays(uri, run_ids))
    import numpy as np

    found: dict[str, dict[str, Arrays]] = {}
    for run_id in run_ids:
        curves = client_history(workspace, run_id)
        found[run_id] = {
            key: (
                np.array([step for step, _ in points], dtype=np.int64),
                np.array([value for _, value in points], dtype=np.float64),
            )
            for key, points in curves.items()
        }
    return found


def latest_metrics(
    workspace: Workspace, run_ids: list[str]
) -> dict[str, dict[str, tuple[Any, ...]]] | None:
    """Each run's latest value of each metric, (step, timestamp, value, is_nan) by key (a
    sign that a curve grew; `_history_sql.latest_points`); None for a tracking server."""
    uri = tracking_uri(workspace.settings)
    if not is_sql_store(uri):
        return None
    return _read_tables(workspace, lambda: latest_points(uri, run_ids))


def _read_tables(workspace: Workspace, read: Callable[[], Found]) -> Found:
    """`read()` on MLflow's tables without importing mlflow (seconds a process: a chart's
    first view paid them); a store whose tables are not there yet is opened by MLflow's
    client (created, migrated, or its error said) and read again."""
    try:
        return read()
    except DBAPIError:
        open_client(workspace)
        return read()


def client_history(
    workspace: Workspace, run_id: str, keys: list[str] | None = None
) -> dict[str, list[tuple[int, float]]]:
    """`metric_history` through MLflow's client (one `Metric` entity a point)."""
    client = open_client(workspace)
    names = keys if keys is not None else sorted(client.get_run(run_id).data.metrics)
    curves = {}
    for key in names:
        points = client.get_metric_history(run_id, key)
        curves[key] = sorted((int(point.step), float(point.value)) for point in points)
    return curves
