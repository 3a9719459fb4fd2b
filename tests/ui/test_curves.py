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
from forgeml.ui._curves import CurveCache, run_curves
from forgeml.ui._lttb import lttb
from tests.tracking.conftest import mlflow_template  # noqa: F401 (the fixture)


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
