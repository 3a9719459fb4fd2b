"""Live accuracy from labels that arrived later, and an estimate without them (CBPE-style).

Measured: over the latest `window` labelled predictions of a served model (the store's
`feedback` rows, `forgeml.serve.feedback`), accuracy for a classifier (the predicted
label equals the label) and MAE for a regressor, overall and per value of a slice column.

Estimated: a classifier's top-class probability, calibrated, is the chance that its
prediction is right, so the mean calibrated confidence over a window is its expected
accuracy, labels or not (NannyML's confidence-based performance estimation, CBPE;
Guo et al. 2017 on calibration). The calibration is an isotonic fit of "was right" on the
top-class probability over the model version's validation split, made once and kept
beside the version's drift reference with the accuracy measured there (the reference
accuracy). The estimate reads the latest `window` predictions of the request log (the live
window); without a log, those of the labelled rows. It holds under covariate shift (the
inputs move, P(label | inputs) does not) and misses concept drift, which the measured
accuracy catches once labels come. `accuracy_windows` measures the labelled rows window by
window (each window's estimate from its own predictions).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import orjson
from pydantic import BaseModel

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import ConfigError, InvalidDataError
from forgeml.monitor.drift import reference_path

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.serve.model import LoadedModel

Task = Literal["classification", "regression"]
_MOST_ROWS = 20_000  # of the validation split, for the calibration
_KNOTS = 256  # points kept of the isotonic fit
_BATCH = 1024
_NUMERIC_BINS = 4  # a numeric slice column with more distinct values is cut in quartiles


class Calibration(BaseModel):
    """A model version's confidence calibration and its accuracy on the validation split."""

    model: str  # NAME@vN
    task: Task
    rows: int
    reference_accuracy: float | None = None
    reference_mae: float | None = None
    confidence: list[float] = []  # knots of the isotonic fit: top-class probability ...
    calibrated: list[float] = []  # ... and the share of predictions right at it

    def expected_accuracy(self, confidences: list[float]) -> float | None:
        """The mean calibrated confidence of `confidences` (None: none, or no calibration)."""
        if not confidences or not self.confidence:
            return None
        values = np.interp(np.asarray(confidences, float), self.confidence, self.calibrated)
        return float(values.mean())


class SliceMetrics(BaseModel):
    """The measures of the labelled rows whose slice column holds `value`."""

    column: str
    value: str
    rows: int
    accuracy: float | None = None
    mae: float | None = None
    estimated_accuracy: float | None = None


class AccuracyReport(BaseModel):
    """Measured and estimated accuracy of one served model over its latest window."""

    served: str
    model: str
    task: Task
    window: int
    labelled_rows: int
    accuracy: float | None = None
    mae: float | None = None
    estimated_accuracy: float | None = None
    estimated_rows: int = 0
    estimated_from: Literal["request log", "feedback", "none"] = "none"
    reference_accuracy: float | None = None
    reference_mae: float | None = None
    slices: list[SliceMetrics] = []


class WindowAccuracy(BaseModel):
    """The measures of one window of labelled predictions (its first and last prediction's
    times, ISO 8601)."""

    start: str
    end: str
    rows: int
    accuracy: float | None = None
    mae: float | None = None
    estimated_accuracy: float | None = None


class AccuracyWindows(BaseModel):
    """Measured (and estimated) accuracy of one served model, window by window."""

    served: str
    model: str
    task: Task
    window: int
    labelled_rows: int
    reference_accuracy: float | None = None
    reference_mae: float | None = None
    windows: list[WindowAccuracy] = []


def calibration_path(workspace: Workspace, name: str, version: int) -> Path:
    """Where the calibration of `name@v{version}` is kept (beside its drift reference)."""
    return reference_path(workspace, name, version).with_name(f"v{version}.calibration.json")


def model_calibration(
    workspace: Workspace, model_ref: str, *, any_project: bool = False
) -> Calibration:
    """The calibration of the model version `model_ref` names, made once and kept.

    Args:
        any_project: calibrate on another project's dataset than the workspace's, as
            `drift.model_reference` reads one: for the server's own reads only.

    Raises:
        NotFoundError, UsageError: no such model version.
        ConfigError: it records no dataset version or target to calibrate on.
        OtherProjectError: without `any_project`, its validation split is a dataset of
            another project than the workspace's (checked before a kept calibration is read).
    """
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version

    found = get_model_version(workspace, model_ref)
    if found.dataset_version is not None and not any_project:
        catalog.check_readable(workspace, found.dataset_version)
    path = calibration_path(workspace, found.name, found.version)
    if path.is_file():
        return Calibration.model_validate_json(path.read_bytes())
    calibration = _calibrate(workspace, found)
    atomic_write_text(path, calibration.model_dump_json())
    return calibration


def _validation_rows(workspace: Workspace, found: Any) -> tuple[list[Any], list[Any]]:
    """The raw rows and targets of the version's validation split (at most _MOST_ROWS)."""
    from forgeml.data import catalog

    ref = f"{found.name}@v{found.version}"
    dataset = found.dataset_version
    target = (found.run.config.get("data") or {}).get("target")
    if dataset is None or target is None:
        raise ConfigError(
            f"{ref} records no dataset version and target, so it cannot be calibrated: "
            "the accuracy estimate needs its validation split."
        )
    split = "validation" if catalog.SPLIT_COLUMN in dataset.schema else None
    frame = catalog.read_frame(workspace, dataset, split).drop_nulls(target).head(_MOST_ROWS)
    if frame.height == 0:
        raise ConfigError(f"The validation split of {ref}'s data holds no labelled rows.")
    targets = frame[target].to_list()
    features = frame.drop([target, *([catalog.SPLIT_COLUMN] * (split is not None))])
    return features.to_dicts(), targets


def _run(model: LoadedModel, rows: list[Any], outputs: set[str]) -> dict[str, np.ndarray]:
    parts = [model.run_rows(rows[i : i + _BATCH], outputs) for i in range(0, len(rows), _BATCH)]
    return {name: np.concatenate([part[name] for part in parts]) for name in outputs}


def _calibrate(workspace: Workspace, found: Any) -> Calibration:
    from scipy.optimize import isotonic_regression

    from forgeml.serve.model import load_model

    rows, targets = _validation_rows(workspace, found)
    model = load_model(workspace, found, "torch", None)
    ref = f"{found.name}@v{found.version}"
    answers = {field.name for field in model.outputs}
    if "prediction" in answers:
        predicted = _run(model, rows, {"prediction"})["prediction"].astype(float)
        mae = float(np.abs(predicted - np.asarray(targets, float)).mean())
        return Calibration(model=ref, task="regression", rows=len(rows), reference_mae=mae)
    if not {"label", "probabilities"} <= answers:
        raise ConfigError(f"{ref} answers neither labels with probabilities nor a prediction.")
    arrays = _run(model, rows, {"label", "probabilities"})
    right = np.array([str(p) == str(t) for p, t in zip(arrays["label"], targets, strict=True)])
    confidence = arrays["probabilities"].max(axis=1).astype(float)
    order = np.argsort(confidence, kind="stable")
    fitted = isotonic_regression(right[order].astype(float)).x
    knots = np.linspace(0, len(order) - 1, min(_KNOTS, len(order))).round().astype(int)
    return Calibration(
        model=ref,
        task="classification",
        rows=len(rows),
        reference_accuracy=float(right.mean()),
        confidence=confidence[order][knots].tolist(),
        calibrated=fitted[knots].tolist(),
    )


def logged_predictions(
    log: Path, served: str, rows: int
) -> tuple[list[dict[str, Any]], str | None]:
    """The latest `rows` predictions the request log holds for `served`, oldest first, and
    the model version that answered the last of them."""
    from forgeml.serve.predictions import row_predictions

    window: deque[dict[str, Any]] = deque(maxlen=rows)
    version = None
    if not log.is_file():
        return [], None
    with log.open("rb") as lines:
        for line in lines:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # the last line may be half-written
            if not isinstance(entry, dict) or entry.get("model") != served:
                continue
            if entry.get("outputs") is None:
                continue  # a request the server refused answered no predictions
            count = len(entry.get("instances") or [])
            window.extend(row_predictions(entry["outputs"], count))
            version = entry.get("version") or version
    return list(window), version


def _measures(
    predictions: list[dict[str, Any]], labels: list[Any], calibration: Calibration
) -> dict[str, float | None]:
    if calibration.task == "regression":
        pairs = zip(predictions, labels, strict=True)
        errors = [abs(float(p["value"]) - float(y)) for p, y in pairs]
        return {"mae": float(np.mean(errors)) if errors else None}
    right = [p.get("label") == str(y) for p, y in zip(predictions, labels, strict=True)]
    return {
        "accuracy": float(np.mean(right)) if right else None,
        "estimated_accuracy": _estimate(predictions, calibration),
    }


def _estimate(predictions: list[dict[str, Any]], calibration: Calibration) -> float | None:
    confidences = [p["confidence"] for p in predictions if p.get("confidence") is not None]
    return calibration.expected_accuracy(confidences)


def _slice_value(value: Any, edges: list[float] | None) -> str:
    if edges is None or value is None or not isinstance(value, int | float):
        return str(value)
    position = int(np.searchsorted(edges, value, side="right"))
    low = "-inf" if position == 0 else f"{edges[position - 1]:g}"
    high = "inf" if position == len(edges) else f"{edges[position]:g}"
    return f"[{low}, {high})"


def _slices(
    column: str, features: list[dict[str, Any]], predictions: list[Any], labels: list[Any],
    calibration: Calibration,
) -> list[SliceMetrics]:  # fmt: skip
    values = [row.get(column) for row in features]
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    edges = None
    if numbers and len(set(numbers)) > 2 * _NUMERIC_BINS:
        inner = np.quantile(numbers, np.linspace(0, 1, _NUMERIC_BINS + 1)[1:-1])
        edges = sorted({float(edge) for edge in inner})
    groups: dict[str, list[int]] = {}
    for index, value in enumerate(values):
        groups.setdefault(_slice_value(value, edges), []).append(index)
    return [
        SliceMetrics(
            column=column,
            value=value,
            rows=len(members),
            **_measures(
                [predictions[i] for i in members], [labels[i] for i in members], calibration
            ),
        )
        for value, members in sorted(groups.items(), key=lambda item: -len(item[1]))
    ]


def labelled_window(workspace: Workspace, served: str, window: int) -> list[Any]:
    """The latest `window` feedback rows of served model `served`, newest first."""
    from sqlalchemy import select

    from forgeml.core.store import FeedbackRecord

    with workspace.store.session() as session:
        query = (
            select(FeedbackRecord)
            .where(FeedbackRecord.model == served)
            .order_by(FeedbackRecord.predicted_at.desc(), FeedbackRecord.row.desc())
            .limit(window)
        )
        records = list(session.scalars(query))
        session.expunge_all()
    return records


def live_accuracy(
    workspace: Workspace,
    served: str,
    model_ref: str | None,
    window: int,
    slices: list[str] | None = None,
    log: Path | None = None,
    *,
    any_project: bool = False,
) -> AccuracyReport:
    """Measured and estimated accuracy of `served` lately.

    `model_ref` names the version whose calibration and reference apply; None: the one
    that answered the latest labelled prediction, else the latest logged one, else the
    latest version of the model `served` names. `any_project` as `model_calibration`'s.

    Raises:
        NotFoundError, UsageError: no such model version.
        ConfigError: the version cannot be calibrated (no dataset or target recorded).
        OtherProjectError: as `model_calibration`.
    """
    records = labelled_window(workspace, served, window)
    live, logged_version = logged_predictions(log, served, window) if log else ([], None)
    answered = records[0].model_ref if records else logged_version
    calibration = model_calibration(
        workspace, model_ref or answered or served, any_project=any_project
    )
    predictions = [record.prediction for record in records]
    labels = [record.label for record in records]
    measured = _measures(predictions, labels, calibration)
    estimate_from = (live or predictions) if calibration.task == "classification" else []
    report = AccuracyReport(
        served=served,
        model=calibration.model,
        task=calibration.task,
        window=window,
        labelled_rows=len(records),
        accuracy=measured.get("accuracy"),
        mae=measured.get("mae"),
        estimated_accuracy=_estimate(estimate_from, calibration),
        estimated_rows=len(estimate_from),
        estimated_from=("request log" if live else "feedback") if estimate_from else "none",
        reference_accuracy=calibration.reference_accuracy,
        reference_mae=calibration.reference_mae,
    )
    features = [record.features for record in records]
    for column in slices or []:
        if records and not any(column in row for row in features):
            known = ", ".join(sorted(features[0]))
            raise InvalidDataError(
                f"No labelled prediction of '{served}' has a column '{column}' to slice by "
                f"(columns: {known})."
            )
        report.slices += _slices(column, features, predictions, labels, calibration)
    return report


def accuracy_windows(
    workspace: Workspace,
    served: str,
    model_ref: str | None,
    window: int,
    windows: int,
    *,
    any_project: bool = False,
) -> AccuracyWindows:
    """The latest `windows` windows of `window` labelled predictions of `served`, oldest
    first. The newest window ends at the latest label; rows older than the oldest full
    window are left out, unless there are fewer than `window` rows (one window of them).

    `model_ref` names the version whose calibration applies, and `any_project` whether it
    may be calibrated on another project's dataset, as in `live_accuracy`.

    Raises:
        NotFoundError, UsageError: no such model version.
        ConfigError: the version cannot be calibrated (no dataset or target recorded).
        OtherProjectError: as `model_calibration`.
    """
    records = labelled_window(workspace, served, window * windows)[::-1]  # oldest first
    answered = records[-1].model_ref if records else None
    calibration = model_calibration(
        workspace, model_ref or answered or served, any_project=any_project
    )
    first = len(records) % window if len(records) >= window else 0
    found = []
    for start in range(first, len(records), window):
        chunk = records[start : start + window]
        measured = _measures([r.prediction for r in chunk], [r.label for r in chunk], calibration)
        found.append(
            WindowAccuracy(
                start=_iso(chunk[0].predicted_at),
                end=_iso(chunk[-1].predicted_at),
                rows=len(chunk),
                **measured,
            )
        )
    return AccuracyWindows(
        served=served,
        model=calibration.model,
        task=calibration.task,
        window=window,
        labelled_rows=len(records),
        reference_accuracy=calibration.reference_accuracy,
        reference_mae=calibration.reference_mae,
        windows=found,
    )


def _iso(moment: dt.datetime) -> str:
    # SQLite hands back the stored UTC time without its zone
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).isoformat()
