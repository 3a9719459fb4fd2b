"""Prometheus metrics of the training runs in progress, read from the tracking store at
each scrape.

`forgeml server --metrics-port PORT` serves them beside the scheduler's. Only RUNNING runs
whose heartbeat lease is alive have series: a run that ends, or whose process died, drops
out at the next scrape, so their number is bounded by what trains now, not by the history.
Nothing is kept between scrapes: a restarted server exports the same values. Each value is
the latest the run logged to MLflow (`forgeml.train.loop` logs the means of every
`log_every_steps` window, the learning rate at its last step).

| metric | type | labels |
|---|---|---|
| `forgeml_training_loss` | gauge (training loss) | job, run, model |
| `forgeml_training_samples_per_second` | gauge (training throughput) | job, run, model |
| `forgeml_training_learning_rate` | gauge | job, run, model |
| `forgeml_training_steps_total` | counter (optimiser steps done) | job, run, model |
| `forgeml_training_progress_ratio` | gauge (0-1 of the run's planned steps) | job, run, model |
| `forgeml_training_validation_metric` | gauge (validation split score) | job, run, model, metric |

`job` is the scheduler job that trains the run (empty for a run started outside one),
`model` the config's name, `metric` the task's own names (loss, accuracy, f1, rmse...).
Runs of jobs that do not train (optimize) are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import select

from forgeml.core.store import JobRecord, RunRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking._mlflow import TrackingUnavailableError, open_client
from forgeml.tracking.runs import JOB_TAG, RunStatus, lease_expiry

_log = logging.getLogger(__name__)

TRAINING_JOB_KINDS = frozenset({"train", "finetune", "tune"})
# the keys forgeml.train.loop logs, and the family each one feeds
_LATEST = {"train_loss": "loss", "samples_per_s": "throughput", "lr": "lr"}
_STEP_KEY = "train_loss"
_VALIDATION_PREFIX = "eval_"
_LABELS = ["job", "run", "model"]
_Family = GaugeMetricFamily | CounterMetricFamily


def _families() -> dict[str, _Family]:
    """Every family this collector exports, empty: what `describe` lists."""
    return {
        "loss": GaugeMetricFamily(
            "forgeml_training_loss",
            "Training loss of a running run (mean over its latest logging window).",
            labels=_LABELS,
        ),
        "throughput": GaugeMetricFamily(
            "forgeml_training_samples_per_second",
            "Training samples a running run processes per second (latest logging window).",
            labels=_LABELS,
        ),
        "lr": GaugeMetricFamily(
            "forgeml_training_learning_rate",
            "Learning rate of a running run at its latest logged step.",
            labels=_LABELS,
        ),
        "steps": CounterMetricFamily(
            "forgeml_training_steps",
            "Optimiser steps a running run has done, at its latest logged step.",
            labels=_LABELS,
        ),
        "progress": GaugeMetricFamily(
            "forgeml_training_progress_ratio",
            "Share (0-1) of its planned optimiser steps a running run has done.",
            labels=_LABELS,
        ),
        "validation": GaugeMetricFamily(
            "forgeml_training_validation_metric",
            "Latest score of a running run on its validation split, by metric.",
            labels=[*_LABELS, "metric"],
        ),
    }


@dataclass(frozen=True)
class _Point:
    """The latest logged value of one metric of a run, and the step it was logged at."""

    value: float
    step: int


class TrainingCollector(Collector):
    """The latest training metrics of every running run, read from the stores per scrape."""

    def __init__(
        self, workspace: Workspace, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self._workspace = workspace
        self._clock = clock

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        runs = self._running()
        if runs:
            try:
                for labels, config, points in self._latest(runs):
                    _add_run(families, labels, config, points)
            except TrackingUnavailableError as error:
                # the scheduler's and the monitor's metrics still answer
                _log.warning("Training metrics left out of this scrape: %s", error)
        yield from families.values()

    def _running(self) -> list[RunRecord]:
        """RUNNING runs whose lease is alive (a dead process's run awaits its reaping)."""
        now = self._clock()
        with self._workspace.store.session() as session:
            runs = session.scalars(
                select(RunRecord).where(RunRecord.status == RunStatus.RUNNING.value)
            ).all()
        return [run for run in runs if lease_expiry(run) >= now]

    def _latest(
        self, runs: list[RunRecord]
    ) -> Iterator[tuple[list[str], Mapping[str, Any], dict[str, _Point]]]:
        """(job, run, model labels, config, latest points) of each run a training job owns."""
        from mlflow.exceptions import MlflowException

        client = open_client(self._workspace)
        found = []
        for run in runs:
            try:
                data = client.get_run(run.id).data
            except MlflowException:  # deleted from MLflow behind forgeml's back
                continue
            # the proto carries each latest value with its step (the `metrics` dict does not)
            points = {m.key: _Point(m.value, m.step) for m in data.to_proto().metrics}
            found.append((run, data.tags.get(JOB_TAG, ""), points))
        kinds = self._job_kinds({job for _, job, _ in found if job})
        for run, job, points in found:
            if kinds.get(job, "train") in TRAINING_JOB_KINDS:
                yield [job, run.id, run.name], run.config, points

    def _job_kinds(self, jobs: set[str]) -> dict[str, str]:
        if not jobs:
            return {}
        with self._workspace.store.session() as session:
            rows = session.execute(
                select(JobRecord.id, JobRecord.kind).where(JobRecord.id.in_(jobs))
            ).all()
        return {job: kind for job, kind in rows}


def _add_run(
    families: dict[str, _Family],
    labels: list[str],
    config: Mapping[str, Any],
    points: dict[str, _Point],
) -> None:
    for key, name in _LATEST.items():
        if key in points:
            families[name].add_metric(labels, points[key].value)
    for key, point in sorted(points.items()):
        if key.startswith(_VALIDATION_PREFIX):
            families["validation"].add_metric(
                [*labels, key[len(_VALIDATION_PREFIX) :]], point.value
            )
    if _STEP_KEY not in points:
        return
    step = points[_STEP_KEY].step
    families["steps"].add_metric(labels, float(step))
    epoch = points.get("epoch")
    progress = _progress(config, step, epoch.value if epoch is not None else None)
    if progress is not None:
        families["progress"].add_metric(labels, progress)


def _progress(config: Mapping[str, Any], step: int, epoch: float | None) -> float | None:
    """The share of its planned steps a run has done, or None when its config does not say.

    A run plans `max_steps`, or `epochs` passes over its data (forgeml.train.step's
    `BatchPlan`). For the latter the logged fractional `epoch` (epochs done plus the share
    of the current one) over `epochs` is exact without knowing the steps per epoch.
    """
    max_steps, epochs = config.get("max_steps"), config.get("epochs")
    if isinstance(max_steps, int) and max_steps > 0:
        done = step / max_steps
    elif isinstance(epochs, int | float) and epochs > 0 and epoch is not None:
        done = epoch / epochs
    else:
        return None
    return min(max(done, 0.0), 1.0)
