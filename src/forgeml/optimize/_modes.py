"""The three optimisations: ONNX export, int8 quantisation, magnitude pruning.

Each mode checks that it applies to the source bundle, then builds the new bundle in
scratch space and reports on it; `pipeline.optimize_model` registers the result.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import OptimizationError, UsageError
from forgeml.optimize._inputs import batch_rows
from forgeml.optimize._runtime import load_model, load_torch_module
from forgeml.optimize.onnx_export import ONNX_FILE, export_onnx, max_abs_difference
from forgeml.optimize.session import OnnxModel, is_onnx_bundle, read_description
from forgeml.train.thresholds import THRESHOLDS_FILE

if TYPE_CHECKING:
    from torch import nn

    from forgeml.core.store import ModelVersionRecord
    from forgeml.optimize.pipeline import Work

Report = dict[str, Any]
# files a derived bundle keeps from its parent: a mitigated model's child stays mitigated
COMPANIONS = ("feature_spec.json", THRESHOLDS_FILE)


def write_bundle(source: Path, dest: Path, description: dict[str, Any]) -> None:
    """model.json (`description`) and the parent's companion files into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "model.json").write_text(json.dumps(description, indent=2, sort_keys=True))
    for name in COMPANIONS:
        if (source / name).is_file():
            shutil.copyfile(source / name, dest / name)


def export_verified(work: Work, module: nn.Module, dest: Path) -> tuple[Path, Report]:
    """Export `module` to an ONNX bundle at `dest` and check it against PyTorch.

    Raises:
        OptimizationError: the export fails or differs by more than the tolerance.
    """
    from forgeml.train.models import family_of

    dest.mkdir(parents=True)
    description = read_description(work.source)
    family = family_of(description)
    graph = export_onnx(module, batch_rows(work.split, 0, 2), dest / ONNX_FILE, family)
    description["lora"] = None  # an adapter, if any, is merged into the exported graph
    description["onnx"] = {
        "file": ONNX_FILE,
        "inputs": graph.inputs,
        "outputs": graph.outputs,
        "opset": graph.opset,
        "quantization": None,
        "pruning": description.get("pruning"),
    }
    write_bundle(work.source, dest, description)
    tolerance = work.request.tolerance
    cap = family.onnx.rows_cap(description, work.request.verify_rows) if family.onnx else None
    diff, rows = max_abs_difference(
        module, OnnxModel(dest, device="cpu"), work.split, work.request.verify_rows, family, cap
    )
    if not diff <= tolerance:
        raise OptimizationError(
            f"The ONNX export of {work.record.ref} differs from PyTorch by up to {diff:.3g} on "
            f"{rows} held-out rows of the {work.split_name} split, above the tolerance "
            f"{tolerance:g}, so nothing was registered."
        )
    return dest, {
        "max_abs_diff": diff,
        "verified_rows": rows,
        "tolerance": tolerance,
        "opset": graph.opset,
        "fused_operators": graph.fused,
    }


def _require_torch(what: str) -> Callable[[Path, ModelVersionRecord], None]:
    """A mode's check that refuses an ONNX source: `what` needs PyTorch weights."""

    def check(source: Path, record: ModelVersionRecord) -> None:
        if is_onnx_bundle(source):
            parent = f" (its parent is {record.parent})" if record.parent else ""
            raise UsageError(
                f"{record.ref} is already an ONNX model{parent}; {what} needs a model with "
                "PyTorch weights."
            )

    return check


def _run_onnx(work: Work) -> tuple[Path, Report]:
    before = load_model(work.source, device=work.request.device)
    bundle, report = export_verified(work, before.module, work.scratch / "onnx")
    return bundle, {
        **report,
        **work.compare(before, load_model(bundle, device=work.request.device)),
    }


def _check_int8(source: Path, record: ModelVersionRecord) -> None:
    if (read_description(source).get("onnx") or {}).get("quantization"):
        raise UsageError(f"{record.ref} is already quantised; quantise its parent instead.")


def _run_int8(work: Work) -> tuple[Path, Report]:
    from forgeml.optimize.quantize import quantize_int8

    fp32, report = work.source, Report()
    if not is_onnx_bundle(work.source):
        fp32, report = export_verified(work, load_torch_module(work.source), work.scratch / "fp32")
    description = read_description(fp32)
    dest = work.scratch / "int8"
    dest.mkdir()
    per_channel = work.request.per_channel is not False
    quantize_int8(fp32 / description["onnx"]["file"], dest / ONNX_FILE, per_channel)
    description["onnx"] = {
        **description["onnx"], "file": ONNX_FILE, "quantization": "int8",
        "per_channel": per_channel,
    }  # fmt: skip
    write_bundle(fp32, dest, description)
    compared = work.compare(
        load_model(fp32, device=work.request.device), load_model(dest, device=work.request.device)
    )
    return dest, {**report, "quantization": "int8", "per_channel": per_channel, **compared}


def _run_prune(work: Work) -> tuple[Path, Report]:
    from safetensors.torch import save_model

    from forgeml.optimize import prune

    requested, steps = float(work.request.sparsity or 0), work.request.finetune_steps
    module = load_torch_module(work.source)
    weights = prune.prunable_weights(module)
    prune.apply_masks(weights, requested)
    finetuned: dict[str, float] = {}
    if steps:
        logger = work.handle.metric_logger()
        finetuned = prune.finetune(
            module, work.task, work.config, steps, work.scratch / "finetune", logger
        )
    prune.make_permanent(weights)
    achieved = prune.sparsity_of(weights)
    dest = work.scratch / "pruned"
    dest.mkdir()
    save_model(module, str(dest / "model.safetensors"))
    description = read_description(work.source)
    description.pop("onnx", None)
    description["lora"] = None  # merged before pruning
    description["pruning"] = {
        "sparsity": achieved,
        "method": "global_l1_unstructured",
        "finetune_steps": steps,
    }
    write_bundle(work.source, dest, description)
    before = load_model(work.source, device=work.request.device)
    dense = work.source / "model.safetensors"
    return dest, {
        "sparsity": achieved,
        "requested_sparsity": requested,
        "finetune_steps": steps,
        "finetune_metrics": finetuned,
        "deflate_bytes": {
            "before": prune.deflate_size(dense) if dense.exists() else None,
            "after": prune.deflate_size(dest / "model.safetensors"),
        },
        **work.compare(before, load_model(dest, device=work.request.device)),
    }


@dataclass(frozen=True)
class _Mode:
    check: Callable[[Path, ModelVersionRecord], None]
    run: Callable[[Work], tuple[Path, Report]]


MODES = {
    "onnx": _Mode(_require_torch("--onnx"), _run_onnx),
    "int8": _Mode(_check_int8, _run_int8),
    "prune": _Mode(_require_torch("--prune"), _run_prune),
}
