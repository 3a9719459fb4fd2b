"""Several model versions side by side: metric, size and latency, each in its own runtime.

ONNX bundles run in ONNX Runtime, PyTorch bundles in PyTorch, all in this process on the
same rows of the same split, so the figures compare the models and not the harness; a
fairness-mitigated version's figures are of its group thresholds' decisions, as served.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.devices import DeviceName
from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.train.task import TaskData


@dataclass
class ModelProfile:
    """One row of a comparison."""

    ref: str
    parent: str | None
    runtime: str  # "torch" or "onnx"
    device: str  # where it ran: "cuda" or "cpu"
    split: str
    metric: str  # accuracy, rmse, perplexity, or the family objective's (tail_mrr)
    value: float | None
    size_bytes: int
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # batch_N -> p50/p99

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def profile_models(
    workspace: Workspace,
    refs: list[str],
    split: str = "test",
    repeats: int = 20,
    threads: int | None = None,
    device: DeviceName = "auto",
) -> list[ModelProfile]:
    """Score and time each model version on `split` of the data it was trained on.

    Args:
        workspace: holds the versions.
        refs: model references, one row each (in this order).
        split: train, validation or test.
        repeats: timed calls per batch size.
        threads: ONNX Runtime intra-op threads per operator (default: all cores).
        device: cuda, cpu or auto (`forgeml.core.devices.DeviceOptions`).

    Raises:
        UsageError: no refs, a bad split, or a split the model's data lacks.
        NotFoundError: an unknown model version.
    """
    from forgeml.optimize._inputs import split_of, training_config
    from forgeml.optimize._runtime import load_model
    from forgeml.tracking import download_bundle, get_model_version
    from forgeml.train.data import load_task_data

    if not refs:
        raise UsageError("Name at least one model version to compare.")
    if repeats < 1:
        raise UsageError(f"--repeats must be at least 1, not {repeats}.")
    records = [get_model_version(workspace, ref) for ref in refs]  # unknown refs fail first
    tasks: dict[str, TaskData] = {}  # models trained on the same config share their data
    profiles = []
    with tempfile.TemporaryDirectory(prefix="forgeml-compare-") as scratch:
        for index, record in enumerate(records):
            config = training_config(workspace, record)
            key = config.model_dump_json()
            if key not in tasks:
                tasks[key] = load_task_data(workspace, config)
            task = tasks[key]
            rows = split_of(task, split, record.ref)
            bundle = download_bundle(workspace, record, Path(scratch) / str(index))
            model = load_model(bundle, threads, device)
            metric = model.primary_metric(task)
            profiles.append(
                ModelProfile(
                    ref=record.ref,
                    parent=record.parent,
                    runtime=model.runtime,
                    device=model.device,
                    split=split,
                    metric=metric,
                    value=model.score(task, rows).get(metric),
                    size_bytes=model.size_bytes,
                    latency_ms=model.latency_table(rows, repeats),
                )
            )
    return profiles


def score_on_split(
    workspace: Workspace,
    ref: str,
    data: str | None = None,
    split: str = "test",
    slices: list[str] | None = None,
) -> dict[str, float]:
    """Metrics of model version `ref` on `split` of dataset version `data` (default: the
    data it was trained on), overall and per value of each `slices` column
    ("accuracy/sex=Male"), its rows encoded as its own training encoded them.

    Two models scored with the same `data` are compared on the very same rows: what a
    release gate needs. A fairness-mitigated version is scored on its thresholded
    decisions, the very ones the model server gives those rows.

    Raises:
        NotFoundError: an unknown model or dataset version.
        UsageError: a split the data lacks.
    """
    from forgeml.core.artifacts import file_digest
    from forgeml.optimize._inputs import split_of, training_config
    from forgeml.optimize._runtime import load_model
    from forgeml.tracking import download_bundle, get_model_version
    from forgeml.train.data import load_task_data
    from forgeml.train.evaluate import scalar_metrics

    record = get_model_version(workspace, ref)
    config = training_config(workspace, record)
    with tempfile.TemporaryDirectory(prefix="forgeml-score-") as scratch:
        bundle = download_bundle(workspace, record, Path(scratch))
        columns = list(dict.fromkeys([*config.data.slices, *(slices or [])]))
        fields: dict[str, Any] = {"slices": columns}
        if data is not None:
            fields["dataset"] = data
        spec_file = bundle / "feature_spec.json"
        if config.data.feature_spec is not None and spec_file.is_file():
            # the very spec this model was trained with, not the name's newest version
            name = config.data.feature_spec.partition("@")[0]
            fields["feature_spec"] = f"{name}@{file_digest(spec_file)}"
        config = config.model_copy(update={"data": config.data.model_copy(update=fields)})
        task = load_task_data(workspace, config)
        rows = split_of(task, split, record.ref)
        model = load_model(bundle, device="cpu")
        if model.objective is not None:  # a family scored by its own objective: no slices
            return model.score(task, rows)
        metrics, _ = scalar_metrics(model.evaluate(task, rows))
    return metrics
