from __future__ import annotations

import gc
import sqlite3
import time
from collections.abc import Callable, Iterator

import pytest

from forgeml.core.workspace import Workspace
from forgeml.tracking import MlflowMetricLogger, RunHandle, finish_run, start_run
from forgeml.train.logger import MetricLogger


@pytest.fixture
def run(tracking_workspace: Workspace) -> Iterator[RunHandle]:
    handle = start_run(tracking_workspace, {}, "logging", None)
    yield handle
    finish_run(handle, "FINISHED", {})


def _history(run: RunHandle, key: str) -> list[tuple[int, float]]:
    points = run.client.get_metric_history(run.run_id, key)
    return sorted((point.step, point.value) for point in points)


def _timed(calls: Callable[[], None]) -> float:
    # a full collection of this process's heap (MLflow, SQLAlchemy, pytest: ~400k objects)
    # can alone exceed the budget on a loaded machine, and is not the logger's cost
    gc.disable()
    try:
        started = time.perf_counter()
        calls()
        return time.perf_counter() - started
    finally:
        gc.enable()


def test_it_is_a_metric_logger(run: RunHandle) -> None:
    logger: MetricLogger = MlflowMetricLogger(run.client, run.run_id)
    logger.close()


def test_log_metrics_does_not_wait_for_mlflow_and_everything_arrives(run: RunHandle) -> None:
    logger = MlflowMetricLogger(run.client, run.run_id)

    def hot_loop() -> None:
        for step in range(10_000):
            logger.log_metrics({"train/loss": 1 / (step + 1)}, step)

    elapsed = _timed(hot_loop)
    logger.close()
    assert elapsed < 0.1, f"10k log_metrics calls took {elapsed:.3f} s"
    assert logger.sent == 10_000
    history = _history(run, "train/loss")
    assert len(history) == 10_000
    assert history[0] == (0, 1.0)
    assert history[-1] == (9_999, pytest.approx(1 / 10_000))


def test_log_metrics_returns_while_the_tracking_store_is_locked(
    tracking_workspace: Workspace, run: RunHandle
) -> None:
    logger = MlflowMetricLogger(run.client, run.run_id, flush_seconds=0.05)
    blocker = sqlite3.connect(tracking_workspace.settings.home / "mlflow.db", isolation_level=None)
    try:
        blocker.execute("BEGIN EXCLUSIVE")

        def hot_loop() -> None:
            for step in range(2_000):
                logger.log_metrics({"a": step, "b": -step}, step)

        elapsed = _timed(hot_loop)
        time.sleep(0.2)
        assert logger.sent == 0
    finally:
        blocker.rollback()
        blocker.close()
    logger.close()
    assert elapsed < 0.1, f"2k log_metrics calls took {elapsed:.3f} s"
    assert (logger.sent, logger.dropped) == (4_000, 0)
    assert _history(run, "b")[-1] == (1_999, -1_999.0)


def test_metrics_are_sent_before_close_every_flush_interval(run: RunHandle) -> None:
    logger = MlflowMetricLogger(run.client, run.run_id, flush_seconds=0.1)
    logger.log_metrics({"val/accuracy": 0.5, "val/f1": 0.25}, 3)
    deadline = time.monotonic() + 5
    while logger.sent < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _history(run, "val/accuracy") == [(3, 0.5)]
    assert _history(run, "val/f1") == [(3, 0.25)]
    logger.close()


def test_metric_names_are_made_valid_for_mlflow(run: RunHandle) -> None:
    logger = MlflowMetricLogger(run.client, run.run_id)
    logger.log_metrics({"slice sex=Male/accuracy": 0.5}, 0)
    logger.close()
    assert _history(run, "slice sex_Male/accuracy") == [(0, 0.5)]


def test_unsendable_metrics_are_counted_not_raised(run: RunHandle) -> None:
    logger = MlflowMetricLogger(run.client, "0" * 32)
    logger.log_metrics({"loss": 1.0}, 0)
    logger.close()
    assert (logger.sent, logger.dropped) == (0, 1)


def test_logging_after_close_is_an_error_and_close_is_idempotent(run: RunHandle) -> None:
    logger = MlflowMetricLogger(run.client, run.run_id)
    logger.close()
    logger.close()
    with pytest.raises(RuntimeError, match="after close"):
        logger.log_metrics({"loss": 1.0}, 0)


def test_finish_run_closes_the_loggers_it_handed_out(tracking_workspace: Workspace) -> None:
    handle = start_run(tracking_workspace, {}, "handed-out", None)
    logger = handle.metric_logger(flush_seconds=60)
    logger.log_metrics({"loss": 0.5}, 1)
    finish_run(handle, "FINISHED", {})
    assert logger.sent == 1
    assert _history(handle, "loss") == [(1, 0.5)]
