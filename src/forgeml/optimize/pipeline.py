"""`optimize_model`: one optimisation of a registered model, as a tracked run.

Every optimisation is a run (params: the request; metrics: the report) that registers
its result as a new version whose parent is the source version, so lineage answers
"quantised from what". Any failure (a tolerance breach, an export error) ends the run
FAILED and registers nothing; SIGTERM ends it KILLED (`forgeml.tracking.lifecycle`).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from forgeml.core.devices import DeviceName
from forgeml.core.errors import OptimizationError, UsageError
from forgeml.core.ids import validate_name
from forgeml.optimize._inputs import held_out, training_config

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.optimize._runtime import LoadedModel
    from forgeml.tracking import RunHandle
    from forgeml.train.config import TrainConfig
    from forgeml.train.task import SplitData, TaskData

Mode = Literal["onnx", "int8", "prune"]
REPORT_ARTIFACT = "optimize_report.json"
EXPERIMENT = "optimize"  # every optimisation run, whatever model it made


@dataclass(frozen=True)
class OptimizeRequest:
    """What to do to the model (one mode) and how strictly to check it."""

    mode: Mode
    name: str | None = None  # registered name of the result; default the source's
    tolerance: float = 1e-4  # max |PyTorch - ONNX| allowed on held-out rows
    sparsity: float | None = None  # prune: fraction of Linear weights zeroed
    finetune_steps: int = 0  # prune: recovery fine-tuning steps
    # int8: one weight scale per output channel (None: yes for int8). On MiniLM/SST-2 it lost
    # 0.34 accuracy points where one scale per tensor lost 1.83, and ran as fast or faster
    # (benchmarks/optimize.py); per tensor is there for runtimes without per-channel kernels.
    per_channel: bool | None = None
    verify_rows: int = 128  # held-out rows compared against PyTorch
    latency_repeats: int = 20  # timed calls per batch size
    device: DeviceName = "auto"  # where the models are scored and timed (DeviceOptions)

    def check(self) -> None:
        """Raises UsageError for a request that cannot be carried out."""
        if self.mode not in ("onnx", "int8", "prune"):
            raise UsageError(f"Unknown optimisation '{self.mode}': use onnx, int8 or prune.")
        if self.mode == "prune":
            if self.sparsity is None or not 0 < self.sparsity < 1:
                raise UsageError(
                    f"--prune takes a sparsity strictly between 0 and 1, not {self.sparsity}."
                )
        elif self.sparsity is not None or self.finetune_steps:
            raise UsageError("Sparsity and --finetune-steps apply only to --prune.")
        if self.finetune_steps < 0:
            raise UsageError(f"--finetune-steps must be 0 or more, not {self.finetune_steps}.")
        if self.per_channel is not None and self.mode != "int8":
            raise UsageError("--per-channel and --per-tensor apply only to --quantize int8.")
        if not self.tolerance > 0 or not math.isfinite(self.tolerance):
            raise UsageError(f"--tolerance must be a positive number, not {self.tolerance}.")
        if self.device not in get_args(DeviceName):
            raise UsageError(f"--device must be auto, cuda or cpu, not '{self.device}'.")
        if self.verify_rows < 1 or self.latency_repeats < 1:
            raise UsageError("verify_rows and latency_repeats must be at least 1.")


@dataclass
class OptimizeResult:
    """The registered version, the run that made it and its report."""

    model: ModelVersionRecord
    run_id: str
    report: dict[str, Any]


@dataclass
class Work:
    """Everything a mode needs: the source, its data, the run and scratch space."""

    record: ModelVersionRecord
    config: TrainConfig
    task: TaskData
    split_name: str
    split: SplitData
    source: Path
    scratch: Path
    request: OptimizeRequest
    handle: RunHandle

    def scores(self, model: LoadedModel) -> dict[str, float]:
        """Metrics on the evaluation and test splits, named as training names them (a
        family with its own objective: its served metrics, `LoadedModel.score`)."""
        metrics: dict[str, float] = {}
        for prefix, split in (("", self.task.eval), ("test_", self.task.test)):
            if split is not None and len(split):
                metrics.update({prefix + k: v for k, v in model.score(self.task, split).items()})
        return metrics

    def compare(self, before: LoadedModel, after: LoadedModel) -> dict[str, Any]:
        """Size, latency and metrics of the model before and after the change."""
        metrics = {"before": self.scores(before), "after": self.scores(after)}
        repeats = self.request.latency_repeats
        latency = {
            "before": before.latency_table(self.split, repeats),
            "after": after.latency_table(self.split, repeats),
        }
        key = ("test_" if self.split_name == "test" else "") + after.primary_metric(self.task)
        old, new = metrics["before"].get(key), metrics["after"].get(key)
        return {
            "runtime": {"before": before.runtime, "after": after.runtime},
            "device": {"before": before.device, "after": after.device},
            "size_bytes": {"before": before.size_bytes, "after": after.size_bytes},
            "latency_ms": latency,
            "metrics": metrics,
            "metric": key,
            "metric_delta": new - old if old is not None and new is not None else None,
        }


def optimize_model(workspace: Workspace, ref: str, request: OptimizeRequest) -> OptimizeResult:
    """Optimise model version `ref` as `request` says and register the result.

    Args:
        workspace: holds the source version and receives the run and the new version.
        ref: the source model version (`NAME`, `NAME@vN`, `NAME@ALIAS`).
        request: the mode and its settings.

    Returns:
        The new version (parent: `ref`'s version), its run id and the report.

    Raises:
        UsageError: a bad request, or a mode that does not apply to this model.
        NotFoundError: no such model version.
        OptimizationError: export fails, or the ONNX outputs differ beyond the tolerance.
    """
    from forgeml.optimize._modes import MODES
    from forgeml.tracking import download_bundle, get_model_version, register_model, start_run
    from forgeml.tracking.lifecycle import tracked_run
    from forgeml.train.data import load_task_data

    request.check()
    record = get_model_version(workspace, ref)
    name = validate_name(request.name or record.name, "model name")
    try:
        config = training_config(workspace, record)
    except OptimizationError:
        from forgeml.optimize._graph import optimize_graph

        # a graph imported from another framework has no training run: int8 on its own terms
        result = optimize_graph(workspace, record, name, request)
        if result is None:
            raise
        return result
    task = load_task_data(workspace, config)
    split_name, split = held_out(task, record.ref)
    with tempfile.TemporaryDirectory(prefix="forgeml-optimize-") as scratch:
        source = download_bundle(workspace, record, Path(scratch) / "source")
        MODES[request.mode].check(source, record)
        params = {"optimize": asdict(request), "source": record.ref, "split": split_name}
        handle = start_run(
            workspace,
            params,
            name,
            record.dataset_version,
            lease_seconds=workspace.settings.run_lease_seconds,
            experiment=EXPERIMENT,
        )
        work = Work(
            record,
            config,
            task,
            split_name,
            split,
            source,
            Path(scratch),
            request,
            handle,
        )
        with tracked_run(handle) as run:
            bundle, report = MODES[request.mode].run(work)
            report = {"mode": request.mode, "source": record.ref, "split": split_name, **report}
            handle.client.log_dict(handle.run_id, report, REPORT_ARTIFACT)
            model = register_model(
                workspace, handle, name, bundle, parent=record.ref, metrics=version_metrics(report)
            )
            run.finish(report)
    return OptimizeResult(model, handle.run_id, report)


def version_metrics(report: dict[str, Any]) -> dict[str, Any]:
    """The new version's metrics: its scores, size, batch-1 latency and the check figures."""
    after_latency = report["latency_ms"]["after"]
    metrics: dict[str, Any] = {
        **report["metrics"]["after"],
        "size_bytes": report["size_bytes"]["after"],
        "latency_p50_ms_batch_1": after_latency["batch_1"]["p50_ms"],
    }
    for key in ("max_abs_diff", "sparsity"):
        if report.get(key) is not None:
            metrics[key] = report[key]
    return metrics
