"""Metrics to MLflow off the hot path: the training loop enqueues, a thread sends batches.

`log_metrics` only appends to a deque (thread-safe without a lock), so a training step
never waits on the tracking store. A background thread sends what has accumulated every
`flush_seconds`, or as soon as `max_batch` metrics wait, with `MlflowClient.log_batch`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

from forgeml.tracking._mlflow import sanitize_key

if TYPE_CHECKING:
    from mlflow import MlflowClient

_log = logging.getLogger(__name__)

# MLflow accepts at most 1000 metrics in one log_batch call
MAX_BATCH = 1000

# (key, value, timestamp in ms, step)
_Point = tuple[str, float, int, int]


class MlflowMetricLogger:
    """A `forgeml.train.logger.MetricLogger` that writes to an MLflow run in batches.

    Args:
        client: the MLflow client of the run's tracking store.
        run_id: the MLflow run receiving the metrics.
        flush_seconds: longest time a metric waits before being sent.
        max_batch: send as soon as this many metrics wait (at most 1000).
    """

    def __init__(
        self,
        client: MlflowClient,
        run_id: str,
        *,
        flush_seconds: float = 1.0,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.flush_seconds = flush_seconds
        self.max_batch = min(max_batch, MAX_BATCH)
        self.sent = 0
        self.dropped = 0
        self._pending: deque[_Point] = deque()
        self._keys: dict[str, str] = {}
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(
            target=self._loop, name=f"forgeml-metrics-{run_id[:8]}", daemon=True
        )
        self._thread.start()

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Queue `metrics` at `step`; returns at once."""
        if self._closed:
            raise RuntimeError("log_metrics called after close()")
        now = int(time.time() * 1000)
        pending = self._pending
        for key, value in metrics.items():
            pending.append((key, float(value), now, step))
        if len(pending) >= self.max_batch and not self._wake.is_set():
            self._wake.set()

    def close(self) -> None:
        """Send everything still queued and stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.flush_seconds)
            self._wake.clear()
            stopping = self._closed
            self._flush()
            if stopping:
                return

    def _flush(self) -> None:
        from mlflow.entities import Metric
        from mlflow.exceptions import MlflowException

        while self._pending:
            batch = [self._pending.popleft() for _ in range(min(len(self._pending), MAX_BATCH))]
            metrics = [
                Metric(self._key(key), value, timestamp, step)
                for key, value, timestamp, step in batch
            ]
            try:
                self.client.log_batch(self.run_id, metrics=metrics)
            except (MlflowException, OSError) as error:
                # tracking trouble must not stop training; say what was lost
                self.dropped += len(metrics)
                _log.warning(
                    "Could not send %d metrics to MLflow run %s: %s",
                    len(metrics),
                    self.run_id,
                    error,
                )
            else:
                self.sent += len(metrics)

    def _key(self, key: str) -> str:
        cached = self._keys.get(key)
        if cached is None:
            cached = self._keys[key] = sanitize_key(key)
        return cached
