"""int8 for a graph imported from another framework (`models import FILE.onnx`).

Such a model has no training run, so no dataset to score on: it is quantised like any
ONNX version (`forgeml.optimize.quantize`), and compared with its parent on generated
inputs of the graph's own shapes and types (seeded; standard normal for floats): size,
p50/p99 latency at batch 1 and 32, and the largest |fp32 - int8| over its numeric
outputs. Metrics need labelled rows and are left out of the report, which says so.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forgeml.core.errors import OptimizationError, UsageError

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.optimize.pipeline import OptimizeRequest, OptimizeResult

_OPEN_WIDTH = 8  # a non-batch dimension the graph leaves open
_BATCHES = (1, 32)


def generated_inputs(graph_inputs: list[dict[str, Any]], rows: int) -> dict[str, np.ndarray]:
    """Seeded inputs of the graph's shapes and types, `rows` rows each.

    Raises:
        OptimizationError: a string input (no values can be made up for it).
    """
    rng = np.random.default_rng(0)
    found = {}
    for tensor in graph_inputs:
        shape = [rows, *(_OPEN_WIDTH if d < 0 else d for d in tensor["shape"][1:])]
        dtype = tensor["dtype"]
        if dtype == "str":
            raise OptimizationError(
                f"Input '{tensor['name']}' takes strings; int8 is measured on generated "
                "inputs, which forgeml makes for numeric inputs only."
            )
        if dtype.startswith("float"):
            found[tensor["name"]] = rng.standard_normal(shape).astype(dtype)
        else:
            found[tensor["name"]] = np.zeros(shape, dtype=dtype)
    return found


def _profile(bundle: Path, inputs: dict[int, dict[str, np.ndarray]], repeats: int) -> Any:
    from forgeml.optimize.latency import measure
    from forgeml.optimize.session import OnnxModel

    model = OnnxModel(bundle)
    latency = {}
    for size, feeds in inputs.items():

        def call(feeds: dict[str, np.ndarray] = feeds) -> object:
            return model.run(feeds)

        stats = measure(call, size, repeats)
        latency[f"batch_{size}"] = {"p50_ms": stats.p50_ms, "p99_ms": stats.p99_ms}
    return model, latency


def _max_diff(before: Any, after: Any, feeds: dict[str, np.ndarray]) -> float:
    old, new = before.run(feeds), after.run(feeds)
    diffs = [
        float(np.abs(np.asarray(new[name], np.float64) - np.asarray(old[name], np.float64)).max())
        for name in old
        if np.asarray(old[name]).dtype.kind in "fiu" and np.asarray(old[name]).size
    ]
    return max(diffs, default=0.0)


def quantize_graph(source: Path, dest: Path, request: OptimizeRequest) -> dict[str, Any]:
    """Quantise the imported graph in `source` into the bundle `dest`; return the report."""
    from forgeml.optimize._modes import write_bundle
    from forgeml.optimize.onnx_export import ONNX_FILE
    from forgeml.optimize.quantize import quantize_int8
    from forgeml.optimize.session import read_description

    description = read_description(source)
    per_channel = request.per_channel is not False
    dest.mkdir()
    quantize_int8(source / description["onnx"]["file"], dest / ONNX_FILE, per_channel)
    description["onnx"] = {
        **description["onnx"], "file": ONNX_FILE, "quantization": "int8",
        "per_channel": per_channel,
    }  # fmt: skip
    write_bundle(source, dest, description)
    inputs = {size: generated_inputs(description["graph"]["inputs"], size) for size in _BATCHES}
    before, before_latency = _profile(source, inputs, request.latency_repeats)
    after, after_latency = _profile(dest, inputs, request.latency_repeats)
    return {
        "quantization": "int8",
        "per_channel": per_channel,
        "runtime": {"before": "onnx", "after": "onnx"},
        "size_bytes": {"before": before.size_bytes, "after": after.size_bytes},
        "latency_ms": {"before": before_latency, "after": after_latency},
        "max_abs_diff": _max_diff(before, after, inputs[_BATCHES[-1]]),
        "inputs": "generated (seed 0): an imported graph has no dataset to score on",
        "metrics": {"before": {}, "after": {}},
        "metric": None,
        "metric_delta": None,
    }


def optimize_graph(
    workspace: Workspace, record: ModelVersionRecord, name: str, request: OptimizeRequest
) -> OptimizeResult | None:
    """int8 of an imported graph as a tracked run and a new version; None: not one.

    Raises:
        UsageError: a mode other than int8, or a graph quantised already.
    """
    from forgeml.optimize._modes import MODES
    from forgeml.optimize.pipeline import EXPERIMENT, REPORT_ARTIFACT, OptimizeResult
    from forgeml.optimize.pipeline import version_metrics as metrics_of
    from forgeml.optimize.session import read_description
    from forgeml.tracking import download_bundle, register_model, start_run
    from forgeml.tracking.lifecycle import tracked_run

    with tempfile.TemporaryDirectory(prefix="forgeml-optimize-") as scratch:
        source = download_bundle(workspace, record, Path(scratch) / "source")
        if "graph" not in read_description(source):
            return None
        if request.mode != "int8":
            raise UsageError(
                f"{record.ref} is an ONNX graph imported from another framework; of the "
                "optimisations only --quantize int8 applies to it."
            )
        MODES["int8"].check(source, record)
        report = quantize_graph(source, Path(scratch) / "int8", request)
        report = {"mode": "int8", "source": record.ref, "split": None, **report}
        params = {"optimize": {"mode": "int8", "per_channel": report["per_channel"]},
                  "source": record.ref}  # fmt: skip
        handle = start_run(
            workspace, params, name, None,
            lease_seconds=workspace.settings.run_lease_seconds, experiment=EXPERIMENT,
        )  # fmt: skip
        with tracked_run(handle) as run:
            handle.client.log_dict(handle.run_id, report, REPORT_ARTIFACT)
            model = register_model(
                workspace, handle, name, Path(scratch) / "int8",
                parent=record.ref, metrics=metrics_of(report),
            )  # fmt: skip
            run.finish(report)
    return OptimizeResult(model, handle.run_id, report)
