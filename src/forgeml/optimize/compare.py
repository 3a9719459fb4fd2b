"""Several model versions side by side: metric, size and latency, each in its own runtime.

ONNX bundles run in ONNX Runtime, PyTorch bundles in PyTorch, all in this process on the
same rows of the same split, so the figures compare the models and not the harness.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
) -> list[ModelProfile]:
    """Score and time each model version on `split` of the data it was trained on.

    Args:
        workspace: holds the versions.
        refs: model references, one row each (in this order).
        split: train, validation or test.
        repeats: timed calls per batch size.
        threads: ONNX Runtime intra-op threads per operator (default: all cores).

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
            model = load_model(bundle, threads)
            metric = model.primary_metric(task)
            profiles.append(
                ModelProfile(
                    ref=record.ref,
                    parent=record.parent,
                    runtime=model.runtime,
                    split=split,
                    metric=metric,
                    value=model.score(task, rows).get(metric),
                    size_bytes=model.size_bytes,
                    latency_ms=model.latency_table(rows, repeats),
                )
            )
    return profiles
