"""Benchmark of issue 5's optimisation: PyTorch eager vs ONNX Runtime (fp32) vs int8.

What is measured, for MiniLM fine-tuned on SST-2 and for the Adult MLP, each in a temp
FORGEML_HOME: the model is trained through `forgeml.tracking.runner.run_training` (MiniLM:
examples/sst2/full.yaml's recipe, lr 3e-5, 1 epoch over `--rows` SST-2 training rows,
evaluated on the SST-2 dev set; Adult: examples/adult/train.yaml), then
`forgeml.optimize.optimize_model` exports it to ONNX (verified against PyTorch, ONNX
Runtime's transformer optimizer applied) and quantises that graph to int8 twice, with
per-channel weight scales (the default, row int8) and per tensor (row int8_pt), exactly as
`forgeml optimize --onnx`, `--quantize int8` and `--quantize int8 --per-tensor` do. Each
int8 speed-up is against the fp32 ONNX timings of its own optimisation run (its report's
"before"). The figures are the reports of those runs: median (p50) forward latency at batch
1 and 32 in-process, speed-ups, weights size, and validation accuracy (SST-2 dev for
MiniLM) of each. For MiniLM at batch 32 it also counts the forward pass's FLOPs
(FlopCounterMode) and gives eager's and ONNX's FLOP/s as a share of this CPU's torch.mm peak.

Targets (issue 5): ONNX Runtime >= 1.5x faster than eager; int8 >= 1.5x faster again;
under 1 point of SST-2 accuracy lost.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/optimize.py            # full, ~10-20 min
    PYTHONPATH=src .venv/bin/python benchmarks/optimize.py --quick    # few rows and steps
    PYTHONPATH=src .venv/bin/python benchmarks/optimize.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _adult import EXAMPLES, prepare_adult
from _cli import make_parser, print_json
from _flops import matmul_peak_flops

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

SST2 = Path(__file__).resolve().parents[2] / "shared" / "data" / "sst2"
TARGET_SPEEDUP = 1.5
MAX_ACCURACY_LOSS = 0.01


def _write_rows(source: Path, dest: Path, rows: int) -> Path:
    lines = source.read_text(encoding="utf-8").splitlines()
    dest.write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
    return dest


def train_minilm(workspace: Workspace, scratch: Path, quick: bool, rows: int) -> str:
    """SST-2 MiniLM as examples/sst2/full.yaml trains it, on `rows` training rows."""
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import TrainConfig

    train = _write_rows(SST2 / "train.tsv", scratch / "sst2.tsv", rows)
    dev = _write_rows(SST2 / "dev.tsv", scratch / "sst2-dev.tsv", 64 if quick else 10_000)
    pipeline.add(workspace, "sst2", train, IngestOptions())
    pipeline.add(workspace, "sst2-dev", dev, IngestOptions())
    split = {"ratios": [0.95, 0.05], "stratify": "label", "seed": 0}
    pipeline.derive(workspace, "split", "sst2", split)
    config = {
        "name": "sst2-minilm",
        "data": {
            "dataset": "sst2",
            "target": "label",
            "text_column": "sentence",
            "eval_dataset": "sst2-dev",
            "eval_rename": {"content": "sentence"},
            "test_split": None,
        },
        "model": {"name": "text_classifier", "params": {"max_length": 64}},
        "optimizer": {"name": "adamw", "lr": 3e-5},
        "schedule": {"name": "linear", "warmup_steps": 0 if quick else 30},
        **({"max_steps": 5} if quick else {"epochs": 1}),
        "batch_size": 16 if quick else 32,
        "seed": 0,
    }
    summary = run_training(workspace, TrainConfig.model_validate(config))
    assert summary.model is not None
    return summary.model.ref


def train_adult(workspace: Workspace, quick: bool) -> str:
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    overrides = ["epochs=1"] if quick else []
    summary = run_training(workspace, load_config(str(EXAMPLES / "train.yaml"), overrides))
    assert summary.model is not None
    return summary.model.ref


def optimise(workspace: Workspace, ref: str, repeats: int) -> dict[str, Any]:
    """Eager -> ONNX -> int8 rows for one model, from the optimisation runs' reports."""
    from forgeml.optimize import OptimizeRequest, optimize_model

    onnx = optimize_model(workspace, ref, OptimizeRequest("onnx", latency_repeats=repeats))
    int8 = optimize_model(  # the default: per-channel weight scales
        workspace, onnx.model.ref, OptimizeRequest("int8", latency_repeats=repeats)
    )
    per_tensor = optimize_model(
        workspace,
        onnx.model.ref,
        OptimizeRequest("int8", per_channel=False, latency_repeats=repeats),
    )
    first, second, third = onnx.report, int8.report, per_tensor.report

    def row(report: dict[str, Any], when: str) -> dict[str, Any]:
        latency = report["latency_ms"][when]
        return {
            "runtime": report["runtime"][when],
            "p50_ms_batch_1": latency["batch_1"]["p50_ms"],
            "p50_ms_batch_32": latency["batch_32"]["p50_ms"],
            "size_bytes": report["size_bytes"][when],
            "accuracy": report["metrics"][when].get("accuracy"),
        }

    rows = {
        "eager": row(first, "before"),
        "onnx": {**row(first, "after"), "model": onnx.model.ref},
        "int8": {**row(second, "after"), "model": int8.model.ref},
        "int8_pt": {**row(third, "after"), "model": per_tensor.model.ref},
    }
    # each int8 variant against the fp32 ONNX numbers measured in its own run
    fp32_of = {
        "onnx": rows["eager"],
        "int8": row(second, "before"),
        "int8_pt": row(third, "before"),
    }
    speedups = {
        f"{a}_vs_{b}_batch_{n}": fp32_of[a][f"p50_ms_batch_{n}"] / rows[a][f"p50_ms_batch_{n}"]
        for a, b in (("onnx", "eager"), ("int8", "onnx"), ("int8_pt", "onnx"))
        for n in (1, 32)
    }
    return {
        "model": ref,
        "max_abs_diff": first["max_abs_diff"],
        "fused_operators": first["fused_operators"],
        "rows": rows,
        "speedups": speedups,
        "accuracy_lost_int8": (rows["eager"]["accuracy"] or 0) - (rows["int8"]["accuracy"] or 0),
        "accuracy_lost_int8_pt": (rows["eager"]["accuracy"] or 0)
        - (rows["int8_pt"]["accuracy"] or 0),
    }


def forward_flops(workspace: Workspace, ref: str, size: int) -> float:
    """FLOPs of one eager forward of `ref` over the batch its `size` latency is timed on.

    torch's FlopCounterMode counts the matrix products and attention; the ONNX graph does the
    same arithmetic, so the count divided by each runtime's p50 is each one's FLOP/s.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from forgeml.optimize._inputs import batch_rows, held_out, training_config
    from forgeml.optimize._runtime import load_model
    from forgeml.tracking import download_bundle, get_model_version
    from forgeml.train.data import load_task_data

    record = get_model_version(workspace, ref)
    _, split = held_out(load_task_data(workspace, training_config(workspace, record)), record.ref)
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-flops-") as scratch:
        model = load_model(download_bundle(workspace, record, Path(scratch) / "bundle"))
    counter = FlopCounterMode(display=False)
    with counter, torch.inference_mode():
        model.module(**batch_rows(split, 0, size))
    return float(counter.get_total_flops())


def flop_rates(workspace: Workspace, ref: str, rows: dict[str, Any]) -> dict[str, Any]:
    """Batch-32 FLOP/s of eager and fp32 ONNX against the torch.mm peak of this CPU."""
    flops = forward_flops(workspace, ref, 32)
    peak = matmul_peak_flops()["best"]
    rates = {name: flops / (rows[name]["p50_ms_batch_32"] / 1000) for name in ("eager", "onnx")}
    return {
        "flops_batch_32": flops,
        "matmul_peak_flops": peak,
        **{f"{name}_flops_per_s": rate for name, rate in rates.items()},
        **{f"{name}_share_of_peak": rate / peak for name, rate in rates.items()},
    }


def measure(quick: bool, rows: int, repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {"quick": quick, "sst2_train_rows": rows, "repeats": repeats}
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-optimize-") as scratch:
        home = Path(scratch) / "home"
        workspace = prepare_adult(home)
        try:
            minilm = train_minilm(workspace, Path(scratch), quick, rows)
            results["minilm"] = optimise(workspace, minilm, repeats)
            results["minilm"]["flop_rates"] = flop_rates(
                workspace, minilm, results["minilm"]["rows"]
            )
            results["adult_mlp"] = optimise(workspace, train_adult(workspace, quick), repeats)
        finally:
            workspace.close()
    minilm = results["minilm"]
    results["targets"] = {
        "onnx_1.5x_eager": min(minilm["speedups"][f"onnx_vs_eager_batch_{n}"] for n in (1, 32))
        >= TARGET_SPEEDUP,
        **{
            f"{v}_1.5x_onnx": min(minilm["speedups"][f"{v}_vs_onnx_batch_{n}"] for n in (1, 32))
            >= TARGET_SPEEDUP
            for v in ("int8", "int8_pt")
        },
        "int8_under_1pt_lost": minilm["accuracy_lost_int8"] < MAX_ACCURACY_LOSS,
        "int8_pt_under_1pt_lost": minilm["accuracy_lost_int8_pt"] < MAX_ACCURACY_LOSS,
    }
    return results


def format_table(results: dict[str, Any]) -> str:
    lines = [
        f"{'model':<10} {'runtime':<8} {'p50 b1 ms':>10} {'p50 b32 ms':>11} "
        f"{'size MB':>8} {'accuracy':>9}"
    ]
    for key in ("minilm", "adult_mlp"):
        for name, row in results[key]["rows"].items():
            accuracy = "" if row["accuracy"] is None else f"{row['accuracy']:.4f}"
            lines.append(
                f"{key:<10} {name:<8} {row['p50_ms_batch_1']:>10.3f} "
                f"{row['p50_ms_batch_32']:>11.3f} {row['size_bytes'] / 1e6:>8.2f} {accuracy:>9}"
            )
        speedups = ", ".join(f"{k} {v:.2f}x" for k, v in results[key]["speedups"].items())
        lines.append(f"{key}: {speedups}; max |torch - onnx| {results[key]['max_abs_diff']:.2g}")
    rates = results["minilm"]["flop_rates"]
    lines.append(
        f"minilm batch 32: {rates['flops_batch_32'] / 1e9:.1f} GFLOP per forward; eager "
        f"{rates['eager_flops_per_s'] / 1e9:.1f} GFLOP/s ({rates['eager_share_of_peak']:.0%}), "
        f"onnx {rates['onnx_flops_per_s'] / 1e9:.1f} GFLOP/s ({rates['onnx_share_of_peak']:.0%}) "
        f"of the {rates['matmul_peak_flops'] / 1e9:.1f} GFLOP/s torch.mm peak"
    )
    lines.append(f"targets: {results['targets']}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = make_parser(__doc__, "Few rows and steps (< 1 min).")
    parser.add_argument("--rows", type=int, default=None, help="SST-2 training rows.")
    parser.add_argument("--repeats", type=int, default=None, help="Timed calls per batch.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    rows = args.rows or (128 if args.quick else 4000)
    repeats = args.repeats or (5 if args.quick else 50)
    results = measure(args.quick, rows, repeats)
    print(format_table(results))
    print_json(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
