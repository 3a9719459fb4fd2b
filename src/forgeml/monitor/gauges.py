"""Drift and accuracy gauges of every served model, for `forgeml server`'s /metrics.

A served model is a live deployment (its replicas share one request log) or a model
served on its own, either named by a request log under FORGEML_HOME/logs/requests/.
`MonitorCollector.refresh` measures each one (drift of the latest logged window against
its model version's reference, `forgeml.monitor.drift`; measured, estimated and
reference accuracy, `forgeml.monitor.accuracy`; the labels received) and keeps the
figures; a scrape reads the last figures, so it never waits for a measurement.
`forgeml server` refreshes every cycle, at most every `MIN_REFRESH_S`, in a thread of its
own (`serve_gauges`). Given an `OnlineDriftConfig`, a refresh also feeds the rows each
served model logged since the last one to its versions' online drift detectors
(`forgeml.monitor.drift.OnlineWatch`: calibrated once, resumed after a restart), in that
same thread, so a scrape never waits for a calibration either.

| metric | type | labels |
|---|---|---|
| `forgeml_drift_detected` | gauge (1: a feature of the latest window drifted) | model, version |
| `forgeml_drift_share_ratio` | gauge (share of features that drifted) | model, version |
| `forgeml_drift_score` | gauge (a feature's PSI, else its effect size) | model, version, feature |
| `forgeml_model_accuracy_ratio` | gauge (over the latest labelled window) | model, version |
| `forgeml_model_estimated_accuracy_ratio` | gauge (CBPE, without labels) | model, version |
| `forgeml_model_reference_accuracy_ratio` | gauge (on the validation split) | model, version |
| `forgeml_feedback_total` | counter (labelled rows received) | model |
| `forgeml_drift_online_alarms_total` | counter (online detector's alarms) | ..., feature |
| `forgeml_drift_online_statistic_ratio` | gauge (CUSUM over threshold) | ..., feature |
| `forgeml_drift_online_rows_total` | counter (rows fed to it) | model, version |

`model` is the served name (a deployment's, as in the servers' own metrics), `version`
the model version that answered last. A figure that cannot be had (no log yet, no
reference, no labels, a regressor's accuracy) is absent, not zero; a watched version's
online series start at zero when its detector is built, so a rule's `rate` sees its first
alarm.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from forgeml.core.errors import ForgemlError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.monitor.drift import (
        OnlineDriftConfig,
        OnlineWatch,
        ReferenceProfile,
        WatchedVersion,
    )

_log = logging.getLogger(__name__)
_LABELS = ["model", "version"]
_FEATURE_LABELS = [*_LABELS, "feature"]
# a refresh reads every request log whole: no more often than this, whatever the cycle
# (Prometheus scrapes every 15 s by default, so faster figures would go unread)
MIN_REFRESH_S = 5.0


@dataclass
class ModelHealth:
    """The figures of one served model at one refresh."""

    model: str
    version: str
    drift_detected: bool | None = None
    drift_share: float | None = None
    drift_scores: dict[str, float] = field(default_factory=dict)
    accuracy: float | None = None
    estimated_accuracy: float | None = None
    reference_accuracy: float | None = None
    feedback_total: int = 0


def _families() -> dict[str, GaugeMetricFamily | CounterMetricFamily]:
    def gauge(name: str, text: str, labels: list[str] = _LABELS) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, text, labels=labels)

    return {
        "detected": gauge(
            "forgeml_drift_detected", "1 when a feature of the latest logged window drifted."
        ),
        "share": gauge(
            "forgeml_drift_share_ratio", "Share of features that drifted in the latest window."
        ),
        "score": gauge(
            "forgeml_drift_score",
            "A feature's drift in the latest window: its PSI, else its deciding effect size.",
            [*_LABELS, "feature"],
        ),
        "accuracy": gauge(
            "forgeml_model_accuracy_ratio", "Accuracy over the latest labelled predictions."
        ),
        "estimated": gauge(
            "forgeml_model_estimated_accuracy_ratio",
            "Accuracy estimated from calibrated confidence over the latest predictions.",
        ),
        "reference": gauge(
            "forgeml_model_reference_accuracy_ratio",
            "Accuracy of the model version on its validation split.",
        ),
        "feedback": CounterMetricFamily(
            "forgeml_feedback", "Labelled prediction rows received.", labels=["model"]
        ),
        "online_alarms": CounterMetricFamily(
            "forgeml_drift_online_alarms",
            "Alarms of the online drift detector (a CUSUM per numeric feature).",
            labels=_FEATURE_LABELS,
        ),
        "online_statistic": gauge(
            "forgeml_drift_online_statistic_ratio",
            "A feature's CUSUM statistic over the online detector's threshold (1 alarms).",
            _FEATURE_LABELS,
        ),
        "online_rows": CounterMetricFamily(
            "forgeml_drift_online_rows", "Rows fed to the online drift detector.", labels=_LABELS
        ),
    }


def served_models(workspace: Workspace) -> dict[str, Path]:
    """Every served name with its request log: live deployments, then other logs."""
    from forgeml.serve.deployments import list_deployments

    logs = Path(workspace.settings.home) / "logs" / "requests"
    served = {d.name: logs / f"{d.name}.jsonl" for d in list_deployments(workspace)}
    for log in sorted(logs.glob("*.jsonl")) if logs.is_dir() else []:
        served.setdefault(log.stem, log)
    return served


def _answered(workspace: Workspace, served: str, log: Path) -> str | None:
    """The model version that answered `served`'s latest labelled, else logged, prediction."""
    from forgeml.monitor.accuracy import labelled_window, logged_predictions

    latest = labelled_window(workspace, served, 1)
    return latest[0].model_ref if latest else logged_predictions(log, served, 1)[1]


def measure(workspace: Workspace, served: str, log: Path, window: int) -> ModelHealth | None:
    """The figures of `served` now (None: it answered nothing yet)."""
    from forgeml.monitor.accuracy import live_accuracy
    from forgeml.monitor.drift import detect_drift, model_reference, read_window

    version = _answered(workspace, served, log)
    if version is None:
        return None
    health = ModelHealth(served, version, feedback_total=_feedback_total(workspace, served))
    try:
        report = live_accuracy(workspace, served, version, window, log=log, any_project=True)
        health.accuracy = report.accuracy
        health.estimated_accuracy = report.estimated_accuracy
        health.reference_accuracy = report.reference_accuracy
    except ForgemlError as error:  # e.g. a version without a dataset to calibrate on
        _log.debug("no accuracy for %s: %s", served, error)
    try:
        # the server measures what it serves, in every project
        _, profile = model_reference(workspace, version, any_project=True)
        rows = read_window(log, served, window)
        known = [column for column in rows.columns if column in profile.columns]
        drift = detect_drift(profile, rows, columns=known)
    except ForgemlError as error:  # no rows logged yet, no reference
        _log.debug("no drift for %s: %s", served, error)
        return health
    health.drift_detected = bool(drift.drifted_columns)
    health.drift_share = drift.drifted_share
    for column in drift.columns:
        score = column.psi if column.psi is not None else column.effect_size
        if score is not None:
            health.drift_scores[column.column] = score
    return health


def _feedback_total(workspace: Workspace, served: str) -> int:
    from sqlalchemy import func, select

    from forgeml.core.store import FeedbackRecord

    with workspace.store.session() as session:
        query = select(func.count()).select_from(FeedbackRecord)
        return int(session.scalar(query.where(FeedbackRecord.model == served)) or 0)


class MonitorCollector(Collector):
    """The gauges of the last `refresh`, for a Prometheus registry."""

    def __init__(
        self, workspace: Workspace, window: int = 2000, online: OnlineDriftConfig | None = None
    ) -> None:
        self.workspace = workspace
        self.window = window
        self.online = None if online is None else _online_watch(workspace, online)
        self._health: list[ModelHealth] = []
        self._watched: list[tuple[str, str, WatchedVersion]] = []

    def refresh(self) -> list[ModelHealth]:
        """Measure every served model now, and feed the online detectors; the figures the
        next scrapes read."""
        measured = []
        watched: list[tuple[str, str, WatchedVersion]] = []
        for served, log in served_models(self.workspace).items():
            health = measure(self.workspace, served, log, self.window)
            if health is not None:
                measured.append(health)
            if self.online is not None:
                watched += _follow(self.online, served, log)
        # one assignment each: a scrape sees the old list or the new
        self._health, self._watched = measured, watched
        return measured

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        for health in self._health:
            labels = [health.model, health.version]
            if health.drift_detected is not None:
                families["detected"].add_metric(labels, float(health.drift_detected))
            if health.drift_share is not None:
                families["share"].add_metric(labels, health.drift_share)
            for feature, score in sorted(health.drift_scores.items()):
                families["score"].add_metric([*labels, feature], score)
            for key, value in (
                ("accuracy", health.accuracy),
                ("estimated", health.estimated_accuracy),
                ("reference", health.reference_accuracy),
            ):
                if value is not None:
                    families[key].add_metric(labels, value)
            families["feedback"].add_metric([health.model], health.feedback_total)
        for served, version, figures in self._watched:
            families["online_rows"].add_metric([served, version], figures.rows)
            for feature, ratio in figures.statistics().items():
                labels = [served, version, feature]
                families["online_alarms"].add_metric(labels, figures.alarms.get(feature, 0))
                families["online_statistic"].add_metric(labels, ratio)
        yield from families.values()


def _online_watch(workspace: Workspace, config: OnlineDriftConfig) -> OnlineWatch:
    from forgeml.monitor.drift import OnlineWatch, model_reference

    def reference(version: str) -> ReferenceProfile:
        return model_reference(workspace, version, any_project=True)[1]

    return OnlineWatch(Path(workspace.settings.home), config, reference)


def _follow(watch: OnlineWatch, served: str, log: Path) -> list[tuple[str, str, WatchedVersion]]:
    """`served`'s watched versions after feeding its new rows (none: its state is damaged,
    or feeding failed; its rows are fed at the next refresh)."""
    try:
        versions = watch.follow(served, log)
    except ForgemlError as error:
        _log.warning("online drift of %s: %s", served, error)
        return []
    except Exception:  # one model's failure must not cost the others their figures
        _log.exception("online drift of %s failed", served)
        return []
    return [(served, v, figures) for v, figures in versions.items() if figures.detector is not None]


def serve_gauges(collector: MonitorCollector, interval: float, stop: threading.Event) -> None:
    """Refresh `collector` every `interval` seconds (at least `MIN_REFRESH_S`) until `stop`."""
    while not stop.is_set():
        try:
            collector.refresh()
        except Exception:  # a failed measurement must not stop the server's loop
            _log.exception("could not refresh the drift and accuracy gauges")
        stop.wait(max(interval, MIN_REFRESH_S))
