"""Benchmark of issue 17's edge bundle: its runner vs forgeml serve's predictor, fp32 vs int8.

What is measured, in a temp FORGEML_HOME: the Adult MLP (examples/adult/train.yaml) and,
without --quick, MiniLM fine-tuned on SST-2 (benchmarks/optimize.py's recipe), each exported
by `forgeml.optimize.edge.export_edge` (what `forgeml models export REF --target edge DIR`
runs) at fp32 and with the automatic int8 choice. For each bundle: the file size, the
runner's end-to-end p50 latency at batch 1 (`EdgeModel.predict`: manifest already verified,
encoding rows or tokenizing text in plain Python/numpy, ONNX Runtime, softmax), against
the p50 of the server's in-process predictor on the same row (`LoadedModel.run_rows`, the
PyTorch runtime `forgeml serve` uses by default, with its FeatureSpec or HF tokenizer), and
the int8 agreement with fp32 on held-out rows that decided the automatic choice. Both sides
run with one intra-op thread.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/edge.py            # Adult and MiniLM
    PYTHONPATH=src .venv/bin/python benchmarks/edge.py --quick    # Adult only, 1 epoch
    PYTHONPATH=src .venv/bin/python benchmarks/edge.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _adult import prepare_adult
from _cli import make_parser, print_json

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

TEXT_ROW = "a gorgeous, witty, seductive movie that never quite finds its footing."


def _adult_row() -> dict[str, Any]:
    return {
        "age": 39, "workclass": "State-gov", "fnlwgt": 77516, "education": "Bachelors",
        "education-num": 13, "marital-status": "Never-married", "occupation": "Adm-clerical",
        "relationship": "Not-in-family", "race": "White", "sex": "Male", "capital-gain": 2174,
        "capital-loss": 0, "hours-per-week": 40, "native-country": "United-States",
    }  # fmt: skip


def measure_model(workspace: Workspace, ref: str, row: Any, scratch: Path, repeats: int) -> Any:
    """Size and batch-1 p50 of the fp32 and auto bundles' runner and of the server."""
    from forgeml.optimize.edge import export_edge
    from forgeml.optimize.edge.runner import EdgeModel
    from forgeml.optimize.latency import measure
    from forgeml.serve.model import load_model
    from forgeml.tracking import get_model_version

    # one intra-op thread on both sides: batch 1 of a small model, on a shared machine
    served = load_model(workspace, get_model_version(workspace, ref), "torch", 1)
    answers = {"label", "probabilities"}
    server = measure(lambda: served.run_rows([row], answers), 1, repeats).p50_ms
    found: dict[str, Any] = {"server_p50_ms": server}
    for precision in ("fp32", "auto"):
        folder = scratch / f"{ref.replace('@', '-')}-{precision}"
        bundle = export_edge(workspace, ref, folder, precision)  # type: ignore[arg-type]
        runner = EdgeModel(folder, threads=1)
        found[precision] = {
            "chosen": bundle.precision.chosen,
            "reason": bundle.precision.reason,
            "agreement": bundle.precision.agreement,
            "size_bytes": (folder / "model.onnx").stat().st_size,
            "folder_bytes": sum(p.stat().st_size for p in folder.iterdir()),
            "runner_p50_ms": measure(lambda r=runner: r.predict([row]), 1, repeats).p50_ms,
        }
    return found


def measure_all(quick: bool, repeats: int, rows: int) -> dict[str, Any]:
    from optimize import train_adult, train_minilm

    results: dict[str, Any] = {"quick": quick, "repeats": repeats}
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-edge-") as scratch:
        workspace = prepare_adult(Path(scratch) / "home")
        try:
            adult = train_adult(workspace, quick)
            results["adult_mlp"] = measure_model(
                workspace, adult, _adult_row(), Path(scratch), repeats
            )
            if not quick:
                minilm = train_minilm(workspace, Path(scratch), quick, rows)
                results["minilm"] = measure_model(
                    workspace, minilm, TEXT_ROW, Path(scratch), repeats
                )
        finally:
            workspace.close()
    return results


def format_table(results: dict[str, Any]) -> str:
    lines = [
        f"{'model':<10} {'bundle':<6} {'precision':<9} {'model MB':>9} {'runner p50 ms':>14} "
        f"{'server p50 ms':>14} {'int8 agreement':>15}"
    ]
    for key in ("adult_mlp", "minilm"):
        if key not in results:
            continue
        model = results[key]
        for name in ("fp32", "auto"):
            row = model[name]
            agreement = "" if row["agreement"] is None else f"{row['agreement']:.4f}"
            lines.append(
                f"{key:<10} {name:<6} {row['chosen']:<9} {row['size_bytes'] / 1e6:>9.3f} "
                f"{row['runner_p50_ms']:>14.3f} {model['server_p50_ms']:>14.3f} {agreement:>15}"
            )
        lines.append(f"{key}: auto chose {model['auto']['chosen']}: {model['auto']['reason']}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = make_parser(__doc__, "Adult only, one epoch (< 1 min).")
    parser.add_argument("--repeats", type=int, default=None, help="Timed calls per figure.")
    parser.add_argument("--rows", type=int, default=4000, help="SST-2 training rows.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    repeats = args.repeats or (20 if args.quick else 200)
    results = measure_all(args.quick, repeats, args.rows)
    print(format_table(results))
    print_json(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
