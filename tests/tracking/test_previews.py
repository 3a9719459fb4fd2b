"""Curve previews stored as forgeml ends a run: each metric LTTB-downsampled, keyed by
MLflow's latest value of it, in forgeml's store (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from mlflow.entities import Metric
from sqlalchemy.exc import OperationalError

from forgeml.core.workspace import Workspace
from forgeml.tracking import previews
from forgeml.tracking.history import latest_metrics, metric_arrays
from forgeml.tracking.lttb_many import lttb_arrays
from forgeml.tracking.previews import latest_of, read_curve_previews, store_curve_previews
from forgeml.tracking.runs import RunHandle, finish_run, get_run, reap_expired, start_run


def started(workspace: Workspace, steps: int = 3_000) -> RunHandle:
    """A run with a `loss` curve of `steps` steps, an `acc` of 5 and a single `final`."""
    handle = start_run(workspace, {"lr": 0.1}, "previews", None, lease_seconds=60)
    points = [Metric("loss", 1.0 / (1 + s) + (s * 7919 % 13) / 100, 1_000 + s, s)
              for s in range(steps)]  # fmt: skip
    points += [Metric("acc", s / 10, 50 + s, s) for s in range(5)]
    points += [Metric("final", 0.5, 9, 0)]
    for start in range(0, len(points), 1_000):
        handle.client.log_batch(handle.run_id, metrics=points[start : start + 1_000])
    return handle


def test_finishing_a_run_stores_its_curves_downsampled(store_workspace: Workspace) -> None:
    handle = started(store_workspace)
    finish_run(handle, "FINISHED", {})
    stored = read_curve_previews(store_workspace, [handle.run_id])[handle.run_id]
    assert sorted(stored) == ["acc", "final", "loss"]
    live = metric_arrays(store_workspace, [handle.run_id])[handle.run_id]
    latest = latest_metrics(store_workspace, [handle.run_id])
    assert latest is not None
    for key, preview in stored.items():
        ((steps, values),) = lttb_arrays([live[key]], previews.MAX_POINTS)
        assert preview.steps.tolist() == steps.tolist()
        assert preview.values.tolist() == values.tolist()
        assert preview.length == len(live[key][0])
        assert preview.latest == latest_of(latest[handle.run_id][key])
    assert len(stored["loss"].steps) == previews.MAX_POINTS


def test_storing_again_replaces_a_runs_previews(store_workspace: Workspace) -> None:
    handle = started(store_workspace, steps=10)
    finish_run(handle, "FINISHED", {})
    handle.client.log_batch(handle.run_id, metrics=[Metric("loss", 0.0, 99_999, 10)])
    assert store_curve_previews(store_workspace, [handle.run_id]) == 3
    loss = read_curve_previews(store_workspace, [handle.run_id])[handle.run_id]["loss"]
    assert loss.steps.tolist() == list(range(11)) and loss.latest[:2] == (10, 99_999)


def test_a_reaped_run_gets_previews(store_workspace: Workspace) -> None:
    handle = started(store_workspace, steps=50)
    assert handle.heartbeat is not None
    handle.heartbeat.stop()  # its process died

    reaped = reap_expired(store_workspace, now=datetime.now(UTC) + timedelta(hours=1))

    assert reaped == [handle.run_id]
    stored = read_curve_previews(store_workspace, [handle.run_id])[handle.run_id]
    assert stored["loss"].steps.tolist() == list(range(50))


def test_a_run_ends_even_when_its_previews_cannot_be_stored(
    store_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def locked(*_: object) -> int:
        raise OperationalError("INSERT", {}, Exception("database is locked"))

    monkeypatch.setattr(previews, "store_curve_previews", locked)
    handle = started(store_workspace, steps=10)

    assert finish_run(handle, "FINISHED", {}).status == "FINISHED"
    assert get_run(store_workspace, handle.run_id).status == "FINISHED"
    assert read_curve_previews(store_workspace, [handle.run_id]) == {handle.run_id: {}}


def test_preview_bytes_are_little_endian_arrays(store_workspace: Workspace) -> None:
    handle = started(store_workspace, steps=4)
    finish_run(handle, "FINISHED", {})
    acc = read_curve_previews(store_workspace, [handle.run_id])[handle.run_id]["acc"]
    assert acc.steps.dtype == np.dtype("<i8") and acc.values.dtype == np.dtype("<f8")
    assert acc.values.tolist() == [0.0, 0.1, 0.2, 0.3, 0.4]
