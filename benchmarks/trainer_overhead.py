"""Benchmark of issue 3: the forgeml trainer against a minimal hand-written PyTorch loop.

What is measured: the same MLP (`mlp` zoo model, hidden 512-256, dropout 0.1, ~180k
parameters) on the same Adult features, with the same initial weights, batch size (256),
step count, data order and optimiser (AdamW, lr 1e-3, no weight decay), trained

- by `forgeml.train.loop.fit` WITH tracking on: an `MlflowMetricLogger` of a real run
  (`forgeml.tracking.start_run` ... `finish_run`, heartbeat thread included) receiving every
  step's metrics, checkpointing at its default (no periodic checkpoint; fit still writes its
  one final checkpoint, which is timed), no evaluation split;
- by the baseline: a minimal loop (randperm per epoch, index, forward, cross-entropy,
  zero_grad, backward, step) over the same tensors, with the fused AdamW kernel forgeml's
  optimiser asks for on CPU (torch's default per-tensor loop rounds differently, a gap
  training amplifies to ~0.08 after 600 steps, and is slower: that would be the kernel's
  difference, not the trainer's overhead).

Each timed call is the whole `fit(...)` or the whole baseline function (optimiser creation
included); starting and finishing the run are not timed. The sides alternate, each runs
`--repeats` times after one untimed warm-up, and medians are compared: overhead % =
(baseline samples/s / forgeml samples/s - 1) x 100 (target: under 3%). Both sides take the
same steps in the same order with the same dropout seed, so their final weights must agree:
the largest absolute difference is reported as a check that they did the same work.

FLOP/s: FLOPs per step are counted with `torch.utils.flop_counter.FlopCounterMode` on one
step of forward + backward (the 6 x parameters x samples rule is printed beside it), and
compared with the machine's peak: the best of 30 1024x1024 fp32 `torch.mm` calls in the
same run. torch uses as many threads as there are cores (`--threads N` to change it: on a
loaded machine one thread can be far faster, as OpenMP's threads wait for each other).

Data: Adult (`../shared/data/adult/adult.data`) goes through a temp FORGEML_HOME as
examples/adult/README.md says (add, clean with clean.yaml, split 0.8/0.1/0.1 stratified on
Y, features with features.yaml); the train split's FeatureSpec features feed both sides.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/trainer_overhead.py            # 600 steps x 9
    PYTHONPATH=src .venv/bin/python benchmarks/trainer_overhead.py --quick    # 100 steps x 3
    PYTHONPATH=src .venv/bin/python benchmarks/trainer_overhead.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _adult import prepare_adult
from _cli import make_parser, print_json
from _flops import matmul_peak_flops

if TYPE_CHECKING:
    import torch
    from torch import nn

    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig
    from forgeml.train.task import TaskData

HIDDEN = (512, 256)
BATCH_SIZE = 256
LR = 1e-3
SEED = 0
OVERHEAD_TARGET = 3.0  # percent


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all threads, tracking's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bench_config(steps: int) -> TrainConfig:
    """The run both sides reproduce: train split only, constant LR, no periodic checkpoint."""
    from forgeml.train.config import TrainConfig

    return TrainConfig.model_validate(
        {
            "name": "bench-overhead",
            "data": {
                "dataset": "adult",
                "target": "Y",
                "feature_spec": "adult-features",
                "eval_split": None,
                "test_split": None,
            },
            "model": {"name": "mlp", "params": {"hidden": list(HIDDEN), "dropout": 0.1}},
            "optimizer": {"name": "adamw", "lr": LR, "weight_decay": 0.0},
            "max_steps": steps,
            "batch_size": BATCH_SIZE,
            "seed": SEED,
            "register_model": False,
        }
    )


def raw_loop(model: nn.Module, features: torch.Tensor, labels: torch.Tensor, steps: int) -> None:
    """The baseline: the shortest correct PyTorch training loop over the same batches."""
    import torch
    import torch.nn.functional as F  # noqa: N812 (the usual alias)

    torch.manual_seed(SEED)  # the dropout stream fit seeds too
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0, fused=True)
    model.train()
    rows, per_epoch = len(labels), len(labels) // BATCH_SIZE
    order = torch.Tensor()
    for step in range(steps):
        batch = step % per_epoch
        if batch == 0:  # the order of fit's epoch e: randperm seeded with seed + e
            generator = torch.Generator().manual_seed(SEED + step // per_epoch)
            order = torch.randperm(rows, generator=generator)
        index = order[batch * BATCH_SIZE : (batch + 1) * BATCH_SIZE]
        loss = F.cross_entropy(model(features[index]), labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def forgeml_fit(
    workspace: Workspace, model: nn.Module, task: TaskData, config: TrainConfig, run_root: Path
) -> dict[str, float]:
    """Train with `fit` inside a tracked run; the wall and CPU seconds `fit` took.

    Also `head`, from the call to the end of the first step, and `tail`, from the end of
    the last step to the return (fit's final checkpoint).
    """
    from forgeml.tracking import RunStatus, finish_run, start_run
    from forgeml.tracking.runner import dataset_version_for
    from forgeml.train.loop import fit

    version = dataset_version_for(workspace, config)
    handle = start_run(workspace, config.model_dump(mode="json"), config.name, version)
    logger = handle.metric_logger()
    run_dir = run_root / handle.run_id
    marks: list[float] = []
    start, start_cpu = time.perf_counter(), cpu_seconds()
    result = fit(
        model,
        task,
        config,
        run_dir=run_dir,
        logger=logger,
        progress=lambda *_: marks.append(time.perf_counter()),
    )
    end, used = time.perf_counter(), cpu_seconds() - start_cpu
    finish_run(handle, RunStatus.FINISHED, {"steps": result.steps})
    # set-up before the first step ends, and the final checkpoint after the last one
    return {"wall": end - start, "cpu": used, "head": marks[0] - start, "tail": end - marks[-1]}


def step_flops(model: nn.Module, features: torch.Tensor, labels: torch.Tensor) -> float:
    """FLOPs of one training step (forward + backward), counted by FlopCounterMode."""
    import torch.nn.functional as F  # noqa: N812 (the usual alias)
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        F.cross_entropy(model(features[:BATCH_SIZE]), labels[:BATCH_SIZE]).backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def measure(steps: int, repeats: int, threads: int, progress: bool) -> dict[str, Any]:
    """Prepare Adult, run both sides `repeats` times alternately, and compare."""
    import copy

    import torch

    from forgeml.train.data import load_task_data
    from forgeml.train.models import build_model

    cores = os.cpu_count() or 1
    torch.set_num_threads(threads or cores)
    load_start = os.getloadavg()[0]
    peak = matmul_peak_flops()
    seconds: dict[str, list[float]] = {"forgeml": [], "raw": []}
    cpu: dict[str, list[float]] = {"forgeml": [], "raw": []}
    tails: list[float] = []
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-overhead-") as scratch:
        os.environ.pop("MLFLOW_TRACKING_URI", None)  # the temp home's own MLflow database
        workspace = prepare_adult(Path(scratch) / "home")
        try:
            config = bench_config(steps)
            task = load_task_data(workspace, config)
            features, labels = task.train.inputs["features"], task.train.targets
            torch.manual_seed(SEED)
            initial = build_model("mlp", task, config.model.params)
            finals: dict[str, nn.Module] = {}
            for index in range(repeats + 1):  # run 0 is the untimed warm-up
                for side in ("forgeml", "raw") if index % 2 else ("raw", "forgeml"):
                    model = copy.deepcopy(initial)
                    if side == "raw":
                        start, start_cpu = time.perf_counter(), cpu_seconds()
                        raw_loop(model, features, labels, steps)
                        took, used = time.perf_counter() - start, cpu_seconds() - start_cpu
                    else:
                        run_root = Path(scratch) / "runs"
                        parts = forgeml_fit(workspace, model, task, config, run_root)
                        took, used = parts["wall"], parts["cpu"]
                        if index:
                            tails.append(parts["tail"])
                    finals[side] = model
                    if index:
                        seconds[side].append(took)
                        cpu[side].append(used)
                    if progress:
                        print(f"  run {index}/{repeats} {side}: {took:.2f} s", file=sys.stderr)
            weight_gap = max(
                (a - b).abs().max().item()
                for a, b in zip(
                    finals["forgeml"].parameters(), finals["raw"].parameters(), strict=True
                )
            )
            counted = step_flops(copy.deepcopy(initial), features, labels)
            params = sum(p.numel() for p in initial.parameters())
        finally:
            workspace.close()
    samples = steps * BATCH_SIZE
    sides: dict[str, dict[str, Any]] = {
        side: {
            "seconds": times,
            "median_s": statistics.median(times),
            "best_s": min(times),
            "median_cpu_s": statistics.median(cpu[side]),
            "samples_per_s": samples / statistics.median(times),
            "flops_per_s": counted * steps / statistics.median(times),
        }
        for side, times in seconds.items()
    }
    ours, raw = sides["forgeml"], sides["raw"]
    overhead = 100 * (raw["samples_per_s"] / ours["samples_per_s"] - 1)
    return {
        "steps": steps,
        "batch_size": BATCH_SIZE,
        "repeats": repeats,
        "train_rows": len(labels),
        "features": int(features.shape[1]),
        "hidden": list(HIDDEN),
        "parameters": params,
        "flops_per_step": counted,
        "flops_per_step_6n": 6.0 * params * BATCH_SIZE,
        "cpu_count": cores,
        "torch_threads": torch.get_num_threads(),
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
        "matmul_peak_flops": peak,
        "forgeml": sides["forgeml"],
        "raw": sides["raw"],
        "overhead_pct": overhead,
        "overhead_best_pct": 100 * (ours["best_s"] / raw["best_s"] - 1),
        "cpu_overhead_pct": 100 * (ours["median_cpu_s"] / raw["median_cpu_s"] - 1),
        "max_weight_difference": weight_gap,
        "forgeml_final_checkpoint_s": {"median": statistics.median(tails), "max": max(tails)},
        "target_overhead_pct_max": OVERHEAD_TARGET,
        "meets_target": overhead < OVERHEAD_TARGET,
    }


def format_table(report: dict[str, Any]) -> str:
    """The figures as a plain-text table."""
    ours, raw = report["forgeml"], report["raw"]
    peak = report["matmul_peak_flops"]["best"]
    load = report["load_average_1min"]
    lines = [
        f"forgeml fit (MLflow tracking on) vs a raw PyTorch loop: MLP {report['features']}-"
        f"{'-'.join(map(str, report['hidden']))}-2 ({report['parameters']:,} params), "
        f"{report['steps']} steps x batch {report['batch_size']} on {report['train_rows']:,} "
        f"Adult rows, median of {report['repeats']} alternating runs",
        f"{report['cpu_count']} CPUs, {report['torch_threads']} torch threads, "
        f"load {load['start']:.1f} -> {load['end']:.1f}",
        f"{'':<22}{'forgeml':>12}{'raw loop':>12}",
        f"{'median time (s)':<22}{ours['median_s']:>12.3f}{raw['median_s']:>12.3f}",
        f"{'best time (s)':<22}{ours['best_s']:>12.3f}{raw['best_s']:>12.3f}",
        f"{'median CPU (s)':<22}{ours['median_cpu_s']:>12.3f}{raw['median_cpu_s']:>12.3f}",
        f"{'samples/s (median)':<22}{ours['samples_per_s']:>12,.0f}{raw['samples_per_s']:>12,.0f}",
        f"{'GFLOP/s':<22}{ours['flops_per_s'] / 1e9:>12.2f}{raw['flops_per_s'] / 1e9:>12.2f}",
        f"{'% of torch.mm peak':<22}{100 * ours['flops_per_s'] / peak:>11.1f}%"
        f"{100 * raw['flops_per_s'] / peak:>11.1f}%",
        f"{'runs (s)':<22}{' '.join(f'{s:.2f}' for s in ours['seconds'])}  |  "
        f"{' '.join(f'{s:.2f}' for s in raw['seconds'])}",
        f"FLOPs/step {report['flops_per_step'] / 1e6:.1f} M (FlopCounterMode; 6N rule "
        f"{report['flops_per_step_6n'] / 1e6:.1f} M); torch.mm 1024^2 fp32 peak "
        f"{peak / 1e9:.1f} GFLOP/s (median {report['matmul_peak_flops']['median'] / 1e9:.1f})",
        f"final weights, largest |forgeml - raw|: {report['max_weight_difference']:.2e}; "
        f"fit's final checkpoint (in its time): median "
        f"{report['forgeml_final_checkpoint_s']['median']:.3f} s, max "
        f"{report['forgeml_final_checkpoint_s']['max']:.3f} s",
        f"overhead: {report['overhead_pct']:+.2f}% by median time (target < "
        f"{OVERHEAD_TARGET:g}%: {'met' if report['meets_target'] else 'NOT met'}); "
        f"{report['overhead_best_pct']:+.2f}% by best time; "
        f"{report['cpu_overhead_pct']:+.2f}% by CPU time (all threads)",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = make_parser(__doc__, "100 steps, 3 runs per side")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default 600)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per side (default 9)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: cores)")
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 100 if args.quick else 600
    if args.repeats is None:
        args.repeats = 3 if args.quick else 9
    if args.steps < 1 or args.repeats < 1 or args.threads < 0:
        parser.error("--steps and --repeats must be at least 1, --threads at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    report = measure(args.steps, args.repeats, args.threads, progress=not args.json)
    print(format_table(report))
    print_json(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
