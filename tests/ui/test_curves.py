"""The curves a chart draws: each run's metrics of more than one value, downsampled to the
chart's points, kept while the run logs nothing new and read again once it does."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.entities import Metric

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.tracking._mlflow import ensure_experiment, open_client
from forgeml.tracking.lttb import MAX_POINTS, lttb
from forgeml.tracking.lttb_many import lttb_arrays
from forgeml.tracking.previews import read_curve_previews
from forgeml.tracking.runs import finish_run
from forgeml.ui import _curves
from forgeml.ui._curves import CurveCache, run_curves
from tests.tracking.conftest import mlflow_template, store_workspace  # noqa: F401 (fixtures)
from tests.tracking.test_previews import started


@pytest.fixture
def workspace(tmp_path: Path, mlflow_template: Path) -> Iterator[Workspace]:  # noqa: F811
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        (tmp_path / "home").mkdir()
        shutil.copyfile(mlflow_template, tmp_path / "home" / "mlflow.db")
        found = Workspace(Settings(home=tmp_path / "home", user="tester"))
        yield found
        found.close()


def _log(workspace: Workspace, run_id: str, key: str, steps: range) -> None:
    points = [Metric(key, 1.0 / (1 + s) + (s % 7) / 100, 1_000 + s, s) for s in steps]
    open_client(workspace).log_batch(run_id, metrics=points)


def _runs(workspace: Workspace, count: int) -> list[str]:
    client = open_client(workspace)
    experiment = ensure_experiment(client, "curves", None)
    return [client.create_run(experiment).info.run_id for _ in range(count)]


def test_curves_are_downsampled_and_single_values_left_out(workspace: Workspace) -> None:
    first, second = _runs(workspace, 2)
    _log(workspace, first, "loss", range(500))
    _log(workspace, second, "loss", range(500))
    _log(workspace, second, "acc", range(3))
    _log(workspace, first, "final", range(1))
    found = run_curves(workspace, [first, second], 50, CurveCache(), {first})
    assert list(found[first]) == ["loss"]  # `final` has one value: the table shows it
    assert list(found[second]) == ["acc", "loss"]
    steps, values = found[first]["loss"]
    expected = lttb([(float(s), 1.0 / (1 + s) + (s % 7) / 100) for s in range(500)], 50)
    assert list(zip(steps, values, strict=True)) == [(int(x), y) for x, y in expected]
    assert found[second]["acc"][0] == [0, 1, 2]


def test_an_ended_runs_curve_is_kept_until_it_logs_again(workspace: Workspace) -> None:
    (run,) = _runs(workspace, 1)
    _log(workspace, run, "loss", range(100))
    cache = CurveCache()
    before = run_curves(workspace, [run], 1_000, cache, {run})[run]["loss"]
    assert run_curves(workspace, [run], 1_000, cache, {run})[run]["loss"] is before
    _log(workspace, run, "loss", range(100, 150))
    after = run_curves(workspace, [run], 1_000, cache, {run})[run]["loss"]
    assert after[0] == list(range(150))
    assert run_curves(workspace, [run], 1_000, cache, {run})[run]["loss"] is after


def test_a_running_runs_curve_is_read_every_time(workspace: Workspace) -> None:
    (run,) = _runs(workspace, 1)
    _log(workspace, run, "loss", range(10))
    cache = CurveCache()
    first = run_curves(workspace, [run], 1_000, cache)[run]["loss"]
    again = run_curves(workspace, [run], 1_000, cache)[run]["loss"]
    assert again == first and again is not first


def test_the_cache_drops_the_least_recently_used_beyond_its_points() -> None:
    cache = CurveCache(max_points=10)
    latest = (3, 1_003, 0.0, False)
    cache.put(("a", "loss", latest, 9), ([0, 1, 2, 3], [0.0] * 4))
    cache.put(("b", "loss", latest, 9), ([0, 1, 2, 3], [0.0] * 4))
    assert cache.get(("a", "loss", latest, 9)) is not None  # now the most recently used
    cache.put(("c", "loss", latest, 9), ([0, 1, 2, 3], [0.0] * 4))
    assert cache.get(("b", "loss", latest, 9)) is None
    assert cache.get(("a", "loss", latest, 9)) is not None
    assert cache.get(("c", "loss", latest, 9)) is not None


@pytest.fixture
def live_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The runs each read of MLflow's curves asked for."""
    asked: list[list[str]] = []
    read = _curves.metric_arrays

    def counted(workspace: Workspace, run_ids: list[str]) -> dict:
        asked.append(list(run_ids))
        return read(workspace, run_ids)

    monkeypatch.setattr(_curves, "metric_arrays", counted)
    return asked


@pytest.mark.parametrize("steps", [3_000, 150])
def test_an_ended_runs_curves_come_from_its_preview_equal_to_the_live_ones(
    store_workspace: Workspace,  # noqa: F811
    live_reads: list[list[str]],
    steps: int,
) -> None:
    ended = [started(store_workspace, steps) for _ in range(2)]
    for handle in ended:
        finish_run(handle, "FINISHED", {})
    run_ids = [handle.run_id for handle in ended]
    live = run_curves(store_workspace, run_ids, MAX_POINTS, CurveCache())  # as running runs
    assert live_reads == [run_ids]

    shown = run_curves(store_workspace, run_ids, MAX_POINTS, CurveCache(), set(run_ids))

    assert live_reads == [run_ids]  # no second read of MLflow's curves
    assert shown == live and list(shown[run_ids[0]]) == ["acc", "loss"]


def test_a_smaller_chart_downsamples_the_preview(
    store_workspace: Workspace,  # noqa: F811
    live_reads: list[list[str]],
) -> None:
    long, short = started(store_workspace, 3_000), started(store_workspace, 500)
    for handle in (long, short):
        finish_run(handle, "FINISHED", {})
    run_ids = [long.run_id, short.run_id]

    shown = run_curves(store_workspace, run_ids, 400, CurveCache(), set(run_ids))

    assert live_reads == []
    preview = read_curve_previews(store_workspace, [long.run_id])[long.run_id]["loss"]
    ((steps, values),) = lttb_arrays([(preview.steps, preview.values)], 400)
    assert shown[long.run_id]["loss"] == (steps.tolist(), values.tolist())
    # a preview that holds the whole curve gives exactly the live curve
    live = run_curves(store_workspace, [short.run_id], 400, CurveCache())
    assert shown[short.run_id] == live[short.run_id]


def test_a_value_logged_after_the_preview_is_charted(
    store_workspace: Workspace,  # noqa: F811
    live_reads: list[list[str]],
) -> None:
    handle = started(store_workspace, 3_000)
    finish_run(handle, "FINISHED", {})
    run_id = handle.run_id
    cache = CurveCache()
    run_curves(store_workspace, [run_id], MAX_POINTS, cache, {run_id})
    handle.client.log_batch(run_id, metrics=[Metric("loss", 9.0, 99_999, 3_000)])

    shown = run_curves(store_workspace, [run_id], MAX_POINTS, cache, {run_id})[run_id]

    assert live_reads == [[run_id]]  # the stale preview (and cached curve) were passed by
    assert shown["loss"][0][-1] == 3_000 and shown["loss"][1][-1] == 9.0
    assert shown == run_curves(store_workspace, [run_id], MAX_POINTS, CurveCache())[run_id]


def test_a_running_run_never_uses_a_preview(
    store_workspace: Workspace,  # noqa: F811
    live_reads: list[list[str]],
) -> None:
    handle = started(store_workspace, 300)
    finish_run(handle, "FINISHED", {})
    assert read_curve_previews(store_workspace, [handle.run_id])[handle.run_id]

    run_curves(store_workspace, [handle.run_id], MAX_POINTS, CurveCache())

    assert live_reads == [[handle.run_id]]


def test_a_run_ended_outside_forgeml_is_read_from_mlflow(
    workspace: Workspace, live_reads: list[list[str]]
) -> None:
    (run,) = _runs(workspace, 1)
    _log(workspace, run, "loss", range(300))
    open_client(workspace).set_terminated(run, "FINISHED")

    shown = run_curves(workspace, [run], 100, CurveCache(), {run})[run]

    assert live_reads == [[run]]
    expected = lttb([(float(s), 1.0 / (1 + s) + (s % 7) / 100) for s in range(300)], 100)
    assert list(zip(*shown["loss"], strict=True)) == [(int(x), y) for x, y in expected]
