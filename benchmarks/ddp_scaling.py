"""Benchmark of issue 3: data-parallel (DDP, gloo) scaling of MLP training on CPU.

What is measured: the same MLP (`mlp` zoo model, hidden 512-256, ~180k parameters) on the
same Adult features, global batch 256, `--steps` optimiser steps, trained through
`forgeml.tracking.runner.run_training` (a tracked run, as `forgeml train` runs it) with

- `1 proc x 1 thread`: `workers: 1`, in process, `torch.set_num_threads(1)`: the baseline
  of the scaling figure;
- `2 procs x 1 thread`: `workers: 2`: torchrun starts two ranks (`forgeml.tracking.worker`)
  that each train 128 rows of every global batch and all-reduce gradients (DDP over gloo);
  `OMP_NUM_THREADS=1`, so each process has one core of a 2-core machine;
- `1 proc x N threads` (N = cores): `workers: 1` with all cores to one process: what the
  machine gives without DDP, for context.

- `raw loop 1x1` / `raw DDP loop 2x1`: the baseline, a minimal hand-written loop (randperm,
  index, forward, loss, backward, step; DDP-wrapped with 2 ranks) started by torchrun with
  the same threads, model, data and order, without tracking: the scaling the machine allows.

Scaling efficiency = (2-proc samples/s) / (2 x 1-proc-1-thread samples/s); 1.0 is perfect.
Samples/s come from the loop's own per-step clock (the `samples_per_s` metric rank 0 logs
to MLflow: global batch / step time, all-reduce waits included, averaged over each window
of `log_every_steps`), as total samples over summed step times after the first
`WARMUP_STEPS`; end-to-end wall time of the run (process and torchrun start-up, data
loading, DDP set-up) is reported beside it. Each configuration runs in its own subprocess,
`--repeats` times, alternating; medians reported.

Data: Adult (`../shared/data/adult/adult.data`) prepared in a temp FORGEML_HOME as
examples/adult/README.md does (add, clean, split 0.8/0.1/0.1 stratified on Y, features).
On a machine shared with other work the 2-process figure suffers most: both cores must be
free at once. The load average is reported with the figures.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/ddp_scaling.py            # 600 steps x 3
    PYTHONPATH=src .venv/bin/python benchmarks/ddp_scaling.py --quick    # 120 steps x 1
    PYTHONPATH=src .venv/bin/python benchmarks/ddp_scaling.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _adult import prepare_adult
from _cli import make_parser, print_json

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig

HIDDEN = (512, 256)
BATCH_SIZE = 256
WARMUP_STEPS = 10
# name -> (processes, threads per process); 0 threads: all cores. "raw" layouts run the
# hand-written baseline loop instead of forgeml.
LAYOUTS = {"1x1": (1, 1), "2x1": (2, 1), "1xN": (1, 0), "raw1x1": (1, 1), "raw2x1": (2, 1)}


def bench_config(steps: int, workers: int) -> TrainConfig:
    """The run every layout repeats: train split only, constant LR, nothing registered."""
    from forgeml.train.config import TrainConfig

    return TrainConfig.model_validate(
        {
            "name": "bench-ddp",
            "data": {
                "dataset": "adult",
                "target": "Y",
                "feature_spec": "adult-features",
                "eval_split": None,
                "test_split": None,
            },
            "model": {"name": "mlp", "params": {"hidden": list(HIDDEN), "dropout": 0.1}},
            "optimizer": {"name": "adamw", "lr": 1e-3},
            "max_steps": steps,
            "batch_size": BATCH_SIZE,
            "workers": workers,
            "register_model": False,
        }
    )


def step_throughput(workspace: Workspace, run_id: str) -> dict[str, float]:
    """Samples/s from the run's per-step `samples_per_s` metric, warm-up steps left out."""
    from forgeml.tracking import open_client

    history = open_client(workspace).get_metric_history(run_id, "samples_per_s")
    # each point is the mean rate over the steps since the previous point (log_every_steps)
    points = sorted((point.step, point.value) for point in history)
    timed: list[tuple[int, float]] = []  # (steps in the window, samples/s)
    before = 0
    for step, rate in points:
        if step > WARMUP_STEPS or step == points[-1][0]:
            timed.append((step - before, rate))
        before = step
    seconds = sum(steps * BATCH_SIZE / rate for steps, rate in timed)
    samples = sum(steps for steps, _ in timed) * BATCH_SIZE
    return {"samples_per_s": samples / seconds, "logged_points": len(points)}


def raw_rank(steps: int, out: Path) -> None:
    """One rank of the baseline: a minimal loop (DDP-wrapped with 2 ranks), no tracking.

    Same model, data, global batch and data order as forgeml; each rank takes its
    contiguous half of every global batch. Rank 0 writes its figures to `out` as JSON.
    """
    import torch
    import torch.distributed as torch_dist
    import torch.nn.functional as F  # noqa: N812 (the usual alias)

    from forgeml.core.workspace import open_workspace
    from forgeml.train.data import load_task_data
    from forgeml.train.models import build_model

    config = bench_config(steps, 1)
    workspace = open_workspace()
    try:
        task = load_task_data(workspace, config)
    finally:
        workspace.close()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(0)
    model: torch.nn.Module = build_model("mlp", task, config.model.params)
    if world > 1:
        torch_dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    features, labels = task.train.inputs["features"], task.train.targets
    share, per_epoch = BATCH_SIZE // world, len(labels) // BATCH_SIZE
    order = torch.Tensor()
    seconds = []
    for step in range(steps):
        start = time.perf_counter()
        batch = step % per_epoch
        if batch == 0:
            generator = torch.Generator().manual_seed(step // per_epoch)
            order = torch.randperm(len(labels), generator=generator)
        first = batch * BATCH_SIZE + rank * share
        index = order[first : first + share]
        loss = F.cross_entropy(model(features[index]), labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    if world > 1:
        torch_dist.destroy_process_group()
    if rank == 0:
        timed = seconds[WARMUP_STEPS:]
        rate = len(timed) * BATCH_SIZE / sum(timed)
        out.write_text(json.dumps({"samples_per_s": rate, "logged_steps": len(seconds)}))


def run_raw(layout: str, steps: int) -> dict[str, Any]:
    """Start the baseline's ranks under torchrun and collect rank 0's figures."""
    processes, _ = LAYOUTS[layout]
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-raw-") as scratch:
        out = Path(scratch) / "raw.json"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += ["--nproc-per-node", str(processes), str(Path(__file__).resolve())]
        command += ["--raw-rank", "--steps", str(steps), "--out", str(out)]
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        result = dict(json.loads(out.read_text()))
    return {**result, "wall_s": wall, "steps": steps}


def worker(layout: str, steps: int) -> dict[str, Any]:
    """Train one layout once in this process (and its torchrun ranks); its figures."""
    import torch

    from forgeml.core.workspace import open_workspace
    from forgeml.tracking.runner import run_training

    processes, threads = LAYOUTS[layout]
    if layout.startswith("raw"):
        result = run_raw(layout, steps)
        return {
            **result,
            "wall_samples_per_s": steps * BATCH_SIZE / result["wall_s"],
            "threads_per_process": threads,
        }
    if processes == 1:
        torch.set_num_threads(threads or os.cpu_count() or 1)
    workspace = open_workspace()  # FORGEML_HOME, which the torchrun ranks read too
    try:
        start = time.perf_counter()
        summary = run_training(workspace, bench_config(steps, processes))
        wall = time.perf_counter() - start
        result = step_throughput(workspace, summary.run_id)
    finally:
        workspace.close()
    return {
        **result,
        "wall_s": wall,
        "wall_samples_per_s": steps * BATCH_SIZE / wall,
        "steps": summary.steps,
        "threads_per_process": threads or os.cpu_count(),
    }


def spawn_worker(layout: str, home: Path, steps: int) -> dict[str, Any]:
    """Run one layout in a fresh interpreter and return the JSON it prints last."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("FORGEML_")}
    env.pop("MLFLOW_TRACKING_URI", None)  # the temp home's own MLflow database
    env.update(FORGEML_HOME=str(home), FORGEML_USER="bench")
    processes, threads = LAYOUTS[layout]
    if processes > 1 or layout.startswith("raw"):
        env["OMP_NUM_THREADS"] = str(threads)  # what torchrun would set, said explicitly
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", layout]
    completed = subprocess.run(
        [*command, "--steps", str(steps)], capture_output=True, text=True, env=env, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the {layout} worker failed:\n{completed.stderr.strip()[-4000:]}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the runs of one layout."""
    return {
        "samples_per_s": statistics.median(run["samples_per_s"] for run in runs),
        "wall_s": statistics.median(run["wall_s"] for run in runs),
        "wall_samples_per_s": statistics.median(run["wall_samples_per_s"] for run in runs),
        "threads_per_process": runs[0]["threads_per_process"],
        "runs": runs,
    }


def measure(steps: int, repeats: int, progress: bool) -> dict[str, Any]:
    """Prepare Adult, run every layout `repeats` times alternately, and compare."""
    load_start = os.getloadavg()[0]
    results: dict[str, list[dict[str, Any]]] = {layout: [] for layout in LAYOUTS}
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-ddp-") as scratch:
        home = Path(scratch) / "home"
        prepare_adult(home).close()
        order = list(LAYOUTS)
        for index in range(repeats):
            for layout in order if index % 2 == 0 else order[::-1]:
                results[layout].append(spawn_worker(layout, home, steps))
                if progress:
                    done = results[layout][-1]
                    print(
                        f"  run {index + 1}/{repeats} {layout}: {done['samples_per_s']:,.0f} "
                        f"samples/s ({done['wall_s']:.1f} s wall)",
                        file=sys.stderr,
                    )
    layouts = {layout: summarise(runs) for layout, runs in results.items()}
    single, double = layouts["1x1"]["samples_per_s"], layouts["2x1"]["samples_per_s"]
    raw_single, raw_double = (layouts[name]["samples_per_s"] for name in ("raw1x1", "raw2x1"))
    return {
        "steps": steps,
        "batch_size": BATCH_SIZE,
        "repeats": repeats,
        "hidden": list(HIDDEN),
        "warmup_steps_excluded": WARMUP_STEPS,
        "cpu_count": os.cpu_count(),
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
        "layouts": layouts,
        "speedup_2x1_over_1x1": double / single,
        "scaling_efficiency": double / (2 * single),
        "speedup_2x1_over_1xN": double / layouts["1xN"]["samples_per_s"],
        "raw_scaling_efficiency": raw_double / (2 * raw_single),
    }


def format_table(report: dict[str, Any]) -> str:
    """The figures as a plain-text table."""
    load = report["load_average_1min"]
    lines = [
        f"DDP (gloo) scaling on CPU: MLP 512-256 on Adult, global batch {report['batch_size']}, "
        f"{report['steps']} steps, median of {report['repeats']} run(s) per layout",
        f"{report['cpu_count']} CPUs, load {load['start']:.1f} -> {load['end']:.1f}; "
        f"samples/s from step times after the first {report['warmup_steps_excluded']} steps",
        f"{'layout':<26}{'samples/s':>12}{'wall (s)':>10}{'wall samples/s':>16}",
    ]
    names = {
        "1x1": "1 proc x 1 thread",
        "2x1": "2 procs x 1 thread (DDP)",
        "raw1x1": "raw loop, 1 proc x 1",
        "raw2x1": "raw DDP loop, 2 procs x 1",
    }
    names["1xN"] = f"1 proc x {report['layouts']['1xN']['threads_per_process']} threads"
    for layout, figures in report["layouts"].items():
        lines.append(
            f"{names[layout]:<26}{figures['samples_per_s']:>12,.0f}{figures['wall_s']:>10.1f}"
            f"{figures['wall_samples_per_s']:>16,.0f}"
        )
    lines.append(
        f"scaling efficiency (2-proc / (2 x 1-proc)): {report['scaling_efficiency']:.2f} "
        f"(speed-up {report['speedup_2x1_over_1x1']:.2f}x); 2 procs vs 1 proc on all cores: "
        f"{report['speedup_2x1_over_1xN']:.2f}x"
    )
    lines.append(
        f"baseline (hand-written loop, no tracking) scaling efficiency: "
        f"{report['raw_scaling_efficiency']:.2f}"
    )
    lines.append("each DDP process has one core of this 2-core machine (OMP_NUM_THREADS=1)")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = make_parser(__doc__, "120 steps, 1 run per layout")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default 600)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per layout (default 3)")
    parser.add_argument("--worker", choices=list(LAYOUTS), help="run one layout (internal)")
    parser.add_argument("--raw-rank", action="store_true", help="a baseline rank (internal)")
    parser.add_argument("--out", type=Path, help="where a baseline rank 0 writes (internal)")
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 120 if args.quick else 600
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.raw_rank and args.out is None:
        parser.error("--raw-rank needs --out")
    if args.steps <= WARMUP_STEPS or args.repeats < 1:
        parser.error(f"--steps must exceed {WARMUP_STEPS} and --repeats be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    if args.raw_rank:
        raw_rank(args.steps, args.out)
        return 0
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.steps)))
        return 0
    report = measure(args.steps, args.repeats, progress=not args.json)
    print(format_table(report))
    print_json(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
