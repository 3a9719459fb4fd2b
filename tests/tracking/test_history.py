"""Metric curves read straight from MLflow's SQL tables equal what MLflow's client gives,
run by run and key by key; a tracking server's URI keeps the client's path."""

from __future__ import annotations

import math
import random

import pytest
from mlflow.entities import Metric

from forgeml.core.workspace import Workspace
from forgeml.tracking import history
from forgeml.tracking._history_sql import is_sql_store
from forgeml.tracking._mlflow import ensure_experiment, open_client
from forgeml.tracking.history import (
    client_history,
    latest_metrics,
    metric_arrays,
    metric_histories,
    metric_history,
)


@pytest.fixture(scope="module")
def logged_runs(tracking_workspace: Workspace) -> list[str]:
    """Three runs: long curves logged out of order with repeated steps, single values,
    a NaN, and a run with no metric at all."""
    client = open_client(tracking_workspace)
    experiment = ensure_experiment(client, "history", None)
    rng = random.Random(7)
    runs = []
    for n in range(3):
        run_id = client.create_run(experiment).info.run_id
        runs.append(run_id)
        if n == 2:
            continue
        points = [Metric("loss", rng.random(), 1_000 + s, s) for s in range(300)]
        points += [Metric("loss", rng.random(), 5_000 + s, s) for s in (3, 3, 150)]  # repeats
        points += [Metric("acc", float(s) / 10, 9_000 + s, s) for s in range(20)]
        points += [Metric("lr", math.nan if n else 0.1, 7, 0), Metric("final", 0.5 + n, 8, 0)]
        rng.shuffle(points)
        for start in range(0, len(points), 100):
            client.log_batch(run_id, metrics=points[start : start + 100])
    return runs


def _same(fast: dict[str, list[tuple[int, float]]], slow: dict[str, list[tuple[int, float]]]):
    # NaN != NaN: compare the points as their reprs
    return {k: [repr(p) for p in v] for k, v in fast.items()} == {
        k: [repr(p) for p in v] for k, v in slow.items()
    }


@pytest.mark.parametrize("keys", [None, ["loss"], ["acc", "missing", "lr"]])
def test_the_tables_give_what_mlflows_client_gives(
    tracking_workspace: Workspace, logged_runs: list[str], keys: list[str] | None
) -> None:
    fast = metric_histories(tracking_workspace, logged_runs, keys)
    assert list(fast) == logged_runs
    for run_id in logged_runs:
        slow = client_history(tracking_workspace, run_id, keys)
        assert _same(fast[run_id], slow), run_id
        assert list(fast[run_id]) == sorted(slow)


def test_one_runs_history_is_the_many_runs_read_of_it(
    tracking_workspace: Workspace, logged_runs: list[str]
) -> None:
    one = metric_history(tracking_workspace, logged_runs[1])
    assert _same(one, metric_histories(tracking_workspace, logged_runs)[logged_runs[1]])
    assert math.isnan(one["lr"][0][1])


@pytest.mark.parametrize("tables", [True, False])
def test_the_arrays_a_chart_reads_are_the_histories_points(
    tracking_workspace: Workspace,
    logged_runs: list[str],
    tables: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not tables:  # the tracking server's path: MLflow's client, here on the same tables
        monkeypatch.setattr(history, "is_sql_store", lambda uri: False)
    arrays = metric_arrays(tracking_workspace, logged_runs)
    points = metric_histories(tracking_workspace, logged_runs)
    assert list(arrays) == logged_runs
    for run_id in logged_runs:
        assert list(arrays[run_id]) == list(points[run_id])
        as_points = {
            key: list(zip(steps.tolist(), values.tolist(), strict=True))
            for key, (steps, values) in arrays[run_id].items()
        }
        assert _same(as_points, points[run_id]), run_id
    steps, _ = arrays[logged_runs[0]]["loss"]
    assert steps.dtype.kind == "i" and len(steps) == 303  # the repeated steps kept
    assert math.isnan(arrays[logged_runs[1]]["lr"][1][0])
    assert arrays[logged_runs[2]] == {}


def test_latest_metrics_are_mlflows_latest_value_of_each_metric(
    tracking_workspace: Workspace, logged_runs: list[str]
) -> None:
    latest = latest_metrics(tracking_workspace, logged_runs)
    assert latest is not None
    run = open_client(tracking_workspace).get_run(logged_runs[0])
    assert set(latest[logged_runs[0]]) == set(run.data.metrics) == {"loss", "acc", "lr", "final"}
    step, _, value, is_nan = latest[logged_runs[0]]["acc"]
    assert (step, value, is_nan) == (19, run.data.metrics["acc"], False)
    assert latest[logged_runs[2]] == {}


def test_a_tracking_server_has_no_latest_values_to_read(
    tracking_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    assert latest_metrics(tracking_workspace, ["x"]) is None


@pytest.mark.parametrize(
    ("uri", "sql"),
    [
        ("sqlite:////tmp/mlflow.db", True),
        ("postgresql+psycopg://u@h/db", True),
        ("mysql+pymysql://u@h/db", True),
        ("http://127.0.0.1:5000", False),
        ("https://mlflow.example.com", False),
        ("databricks", False),
    ],
)
def test_which_uris_are_read_as_tables(uri: str, sql: bool) -> None:
    assert is_sql_store(uri) is sql
