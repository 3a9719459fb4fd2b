from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from forgeml.core.workspace import Workspace
from forgeml.tracking import MlflowMetricLogger, RunHandle, finish_run, start_run
from forgeml.train.logger import MetricLogger
from tests._wait import wait_until


@pytest.fixture
def run(tracking_workspace: Workspace) -> Iterator[RunHandle]:
    handle = start_run(tracking_workspace, {}, "logging", None)
    yield handle
    finish_run(handle, "FINISHED", {})


def _history(run: RunHandle, key: str) -> list[tuple[int, float]]:
    points = run.client.get_metric_history(run.run_id, key)
    return sorted((point.step, point.value) for point in points)


def test_it_is_a_metric_logger(run: RunHandle) -> None:
    logger: MetricLogger = MlflowMetricLogger(run.client, run.run_id)
    logger.close()


def test_ten_thousand_metrics_logged_in_a_loop_all_arrive(run: RunHandle) -> None:
    logger = MlflowMetricLogger(run.client, run.run_id)
    for step in range(10_000):
        logger.log_metrics({"train/loss": 1 / (step + 1)}, step)
    logger.close()
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
        for step in range(2_000):  # a logger that waited on the store would stall or drop here
            logger.log_metrics({"a": step, "b": -step}, step)
        # the sender has taken a batch and waits on the locked store; nothing lost or sent
        wait_until(lambda: len(logger._pending) < 4_000, what="the sender's first batch")
        assert (logger.sent, logger.dropped) == (0, 0)
    finally:
        blocker.rollback()
        blocker.close()
    logger.close()
    assert (logger.sent, logger.dropped) == (4_000, 0)
    assert _history(run, "b")[-1] == (1_999, -1_999.0)


def test_metrics_are_sent_before_close_every_flush_interval(run: RunHandle) -> None:
    logger = MlflowMetricLogger(run.client, run.run_id, flush_seconds=0.1)
    logger.log_metrics({"val/accuracy": 0.5, "val/f1": 0.25}, 3)
    wait_until(lambda: logger.sent == 2, what="the timed flush")
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
