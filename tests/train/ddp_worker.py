"""One rank of the DDP equivalence test: `fit` an MLP on fixed synthetic data.

Run by test_distributed.py as `torchrun ... -m tests.train.ddp_worker OUT [options]` (one
rank per process, ending like `forgeml.tracking.worker`: `cleanup()`, then `exit_rank`) or
called in-process via `main([...])` (one process alone). Rank 0 writes
the final weights to OUT/weights.safetensors and the result to OUT/result.json.
"""

from __future__ import annotations

import argparse
import atexit
import json
import statistics
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from forgeml.train.config import TrainConfig
from forgeml.train.distributed import cleanup, exit_rank, init_distributed, wrap_model
from forgeml.train.logger import NullLogger
from forgeml.train.loop import fit
from forgeml.train.models import build_model
from forgeml.train.step import unwrap_model
from forgeml.train.task import SplitData, TaskData


def synthetic_task(rows: int, features: int, classes: int, seed: int) -> TaskData:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(rows, features, generator=generator)
    weights = torch.randn(features, classes, generator=generator)
    targets = (inputs @ weights).argmax(dim=1)
    cut = rows * 3 // 4
    return TaskData(
        task="classification",
        train=SplitData({"features": inputs[:cut]}, targets[:cut]),
        eval=SplitData({"features": inputs[cut:]}, targets[cut:]),
        num_classes=classes,
        class_names=[str(index) for index in range(classes)],
        input_shape=(features,),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--hidden", type=int, nargs="*", default=[32])
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    # at interpreter shutdown (if the rank gets there), write the names of its live threads
    parser.add_argument("--report-shutdown-threads", action="store_true")
    return parser.parse_args(argv)


def _report_shutdown_threads(path: Path) -> None:
    tasks = Path("/proc/self/task")
    names = sorted((task / "comm").read_text().strip() for task in tasks.iterdir())
    path.write_text("\n".join(names))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    ctx = init_distributed()
    if args.report_shutdown_threads:
        report = args.out / f"shutdown-threads-rank{ctx.rank}.txt"
        atexit.register(_report_shutdown_threads, report)
    task = synthetic_task(args.rows, args.features, 3, args.seed)
    config = TrainConfig.model_validate(
        {
            "name": "ddp-test",
            "data": {"dataset": "synthetic", "target": "y"},
            # no dropout: masks would differ between one batch and two half batches
            "model": {"name": "mlp", "params": {"hidden": args.hidden, "dropout": 0.0}},
            "optimizer": {"name": "adamw", "lr": 0.01},
            "max_steps": args.steps,
            "batch_size": args.batch_size,
            "grad_accum": args.grad_accum,
            "seed": args.seed,
            "workers": ctx.world_size,
        }
    )
    torch.manual_seed(args.seed)
    model = build_model("mlp", task, config.model.params)
    wrapped = wrap_model(model, ctx, "ddp")
    started = time.perf_counter()
    result = fit(wrapped, task, config, run_dir=args.out / "run", logger=NullLogger(), dist=ctx)
    elapsed = time.perf_counter() - started
    if ctx.is_main:
        weights = unwrap_model(wrapped).state_dict()
        save_file(
            {name: t.detach().contiguous() for name, t in weights.items()},
            str(args.out / "weights.safetensors"),
        )
        summary = {
            "world_size": ctx.world_size,
            "steps": result.steps,
            "final_metrics": result.final_metrics,
            "train_loss": [
                metrics["train_loss"] for _, metrics in result.history if "train_loss" in metrics
            ],
            "samples_per_s": args.steps * args.batch_size / elapsed,
            # steady state: the median step, without start-up, evaluation and checkpoint
            "step_samples_per_s": statistics.median(
                metrics["samples_per_s"]
                for _, metrics in result.history
                if "samples_per_s" in metrics
            ),
        }
        (args.out / "result.json").write_text(json.dumps(summary))
    cleanup()


if __name__ == "__main__":
    main()
    exit_rank(0)  # a torchrun rank ends as forgeml's worker does (an error exits 1 on its own)
