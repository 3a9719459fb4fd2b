"""A model bundle loaded for scoring: PyTorch weights or an ONNX graph, one interface.

`LoadedModel.module` presents either runtime as a module returning logits, so
`forgeml.train.evaluate.evaluate` scores an ONNX graph exactly as it scores the PyTorch
model it came from (same splits, same metrics, same code). A fairness-mitigated bundle
(`fairness_thresholds.json`) is scored on its thresholded decisions, the server's. A
family with its own objective (`ModelFamily.objective`, read from the bundle's model.json)
is scored by that objective's `evaluate_served` instead, on the family's serving module or
the ONNX graph of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from forgeml.core.devices import DeviceName, torch_device
from forgeml.optimize.latency import LatencyStats, measure
from forgeml.optimize.session import OnnxModel, is_onnx_bundle, read_description

if TYPE_CHECKING:
    from forgeml.train.evaluate import Metrics
    from forgeml.train.models import ModelFamily
    from forgeml.train.models._family import Objective
    from forgeml.train.task import SplitData, TaskData

EVAL_BATCH = 64
LATENCY_BATCHES = (1, 32)  # the batch sizes every report and comparison times


class OnnxModule(nn.Module):
    """An ONNX graph as a module: keyword tensors in, the `logits` output as a tensor out."""

    def __init__(self, onnx: OnnxModel) -> None:
        super().__init__()
        self.onnx = onnx

    def forward(self, **inputs: torch.Tensor) -> torch.Tensor:
        arrays = {name: tensor.cpu().numpy() for name, tensor in inputs.items()}
        return torch.from_numpy(self.onnx.run(arrays, ["logits"])["logits"])


def load_torch_module(bundle_dir: Path) -> nn.Module:
    """The bundle's PyTorch model in eval mode, a LoRA adapter merged into its base."""
    from forgeml.train.recipe import load_bundle_model

    module = load_bundle_model(bundle_dir)
    if read_description(bundle_dir).get("lora"):
        from forgeml.train.lora import has_adapter, merge_adapter

        # a bundle trained with `lora.merge` holds merged weights already: nothing to fold
        if has_adapter(module):
            module = merge_adapter(module)
    return module.eval()


@dataclass
class LoadedModel:
    """A bundle ready to score and time, in the runtime its weights call for."""

    bundle_dir: Path
    module: nn.Module  # the PyTorch model, or an OnnxModule around the graph
    family: ModelFamily
    objective: Objective | None = None  # the family's own evaluation; None: the task's
    device: str = "cpu"  # where it runs: "cuda" or "cpu" (ONNX: its session's providers)

    @property
    def torch_device(self) -> torch.device:
        """Where the scoring loop puts its tensors (an ONNX graph takes them on the CPU)."""
        onnx = isinstance(self.module, OnnxModule)
        return torch.device("cpu" if onnx else self.device)

    @property
    def runtime(self) -> str:
        return "onnx" if isinstance(self.module, OnnxModule) else "torch"

    @property
    def size_bytes(self) -> int:
        """Bytes of the weights: the ONNX file, or the safetensors (adapter) files."""
        if isinstance(self.module, OnnxModule):
            return self.module.onnx.size_bytes
        weights = self.bundle_dir / "model.safetensors"
        if weights.exists():
            return weights.stat().st_size
        return sum(
            p.stat().st_size for p in (self.bundle_dir / "adapter").rglob("*") if p.is_file()
        )

    def score(self, task: TaskData, split: SplitData) -> dict[str, float]:
        """Float metrics of the model on `split` (accuracy, loss, ... as training reports;
        the objective's served metrics for a family with its own objective)."""
        if self.objective is not None:
            served = self.module
            if not isinstance(served, OnnxModule):
                served = self.family.serving_module(served.cpu())  # its objective's device
            return self.objective.evaluate_served(served.eval(), task, split)
        from forgeml.train.evaluate import scalar_metrics

        metrics, _ = scalar_metrics(self.evaluate(task, split))
        return {name: value for name, value in metrics.items() if "/" not in name}

    def evaluate(self, task: TaskData, split: SplitData) -> Metrics:
        """Every metric of the model on `split`, per slice too (`train.evaluate.evaluate`);
        a fairness-mitigated bundle's are of its thresholded decisions, as it serves them.

        Raises:
            InvalidDataError: a row's group is not one its fairness thresholds know.
        """
        from forgeml.train.evaluate import evaluate
        from forgeml.train.thresholds import split_decisions

        device = self.torch_device
        return evaluate(
            self.module.to(device),
            split,
            task.task,
            EVAL_BATCH,
            task.class_names,
            device=device,
            decisions=split_decisions(self.bundle_dir, split),
        )

    def primary_metric(self, task: TaskData) -> str:
        """The metric a comparison leads with: the objective's, else the task's."""
        if self.objective is not None:
            return self.objective.served_metric
        return primary_metric(task)

    def latency(self, split: SplitData, batch_size: int, repeats: int) -> LatencyStats:
        """Forward-pass latency on the first `batch_size` rows of `split`."""
        from forgeml.optimize._inputs import batch_rows

        inputs = batch_rows(split, 0, batch_size)
        if isinstance(self.module, OnnxModule):
            onnx = self.module.onnx
            arrays = {name: tensor.numpy() for name, tensor in inputs.items()}
            return measure(lambda: onnx.run(arrays, ["logits"]), batch_size, repeats)

        device = self.torch_device
        module = self.module.to(device)
        inputs = {name: tensor.to(device) for name, tensor in inputs.items()}

        def forward() -> None:
            with torch.inference_mode():
                module(**inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()  # the kernels ran, not only their launch

        return measure(forward, batch_size, repeats)

    def latency_table(self, split: SplitData, repeats: int) -> dict[str, dict[str, float]]:
        """p50 and p99 milliseconds at each of `LATENCY_BATCHES`, keyed `batch_N`; a batch
        above the family's `OnnxExport.max_rows` is timed at that many rows instead."""
        export = self.family.onnx
        description = read_description(self.bundle_dir)
        sizes = [size if export is None else export.rows_cap(description, size)
                 for size in LATENCY_BATCHES]  # fmt: skip
        table = {}
        for size in dict.fromkeys(sizes):
            stats = self.latency(split, size, repeats)
            table[f"batch_{size}"] = {"p50_ms": stats.p50_ms, "p99_ms": stats.p99_ms}
        return table


def load_model(
    bundle_dir: Path, threads: int | None = None, device: DeviceName = "auto"
) -> LoadedModel:
    """Load a bundle: ONNX Runtime when its weights are an ONNX graph, else PyTorch; on the
    GPU or the CPU as `device` says (`forgeml.core.devices`)."""
    from forgeml.train.models import family_of

    module: nn.Module
    if is_onnx_bundle(bundle_dir):
        onnx = OnnxModel(bundle_dir, threads, device)
        module, placed = OnnxModule(onnx), onnx.device
    else:
        module, placed = (
            load_torch_module(bundle_dir),
            torch_device(device, torch.cuda.is_available()),
        )
    description = read_description(bundle_dir)
    family = family_of(description)
    objective = family.training_objective(description["model"].get("params") or {})
    return LoadedModel(Path(bundle_dir), module, family, objective, placed)


def primary_metric(task: TaskData) -> str:
    """The metric a comparison of the task's models leads with: accuracy, RMSE or perplexity."""
    return {"classification": "accuracy", "regression": "rmse"}.get(task.task, "perplexity")
