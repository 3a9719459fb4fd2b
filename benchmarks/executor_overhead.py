"""Benchmark of issue 4: what running a short training job through the local executor adds.

What is measured: `forgeml train examples/adult/train.yaml` shortened to a few steps
(`epochs=null`, `max_steps` 20, no warm-up) on Adult prepared as examples/adult/README.md
does, run as a whole command (a subprocess, wall clock from start to exit) in two ways:

- direct: the command's internal direct mode (`FORGEML_JOB_ID` set), which is what runs
  inside a job: it trains at once, as `forgeml train` did before the scheduler;
- through the executor: plain `forgeml train` with no server running: the job is recorded,
  a one-job scheduler loop starts it through the local executor (launcher, CPU pinning,
  usage sampling, log capture into the artifact store) and streams its log until it ends.
  This includes a second interpreter start and CLI import (the job's own command). The job
  asks for every CPU the direct run may use (`--cpus N`), so both train on the same cores.

The two modes alternate over the runs (direct first); medians are reported, and the added
seconds are the difference of the medians. Target: under 2 s added. Both modes use the
same prepared workspace (each run records its own run and model version).

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/executor_overhead.py            # 5 runs each
    PYTHONPATH=src .venv/bin/python benchmarks/executor_overhead.py --quick    # 2 runs each
    PYTHONPATH=src .venv/bin/python benchmarks/executor_overhead.py --json     # JSON last line
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

from _adult import EXAMPLES, prepare_adult
from _cli import make_parser, print_json

TARGET_SECONDS = 2.0
OVERRIDES = ("epochs=null", "max_steps=20", "schedule.warmup_steps=0", "early_stopping=null")
FORGEML = [sys.executable, "-m", "forgeml.cli"]


def _command(direct: bool) -> list[str]:
    args = [a for item in OVERRIDES for a in ("--set", item)]
    if not direct:  # the job gets every CPU the direct run has, so only the overhead differs
        args += ["--cpus", str(len(os.sched_getaffinity(0)))]
    return [*FORGEML, "train", str(EXAMPLES / "train.yaml"), *args, "--json"]


def _env(home: Path, direct: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORGEML_", "MLFLOW_"))}
    env |= {"FORGEML_HOME": str(home), "FORGEML_USER": "bench"}
    if direct:
        env["FORGEML_JOB_ID"] = "benchmark-direct"  # the internal marker: train right here
    return env


def run_once(home: Path, direct: bool) -> float:
    """Seconds from start to exit of one `forgeml train`; raises if it fails."""
    started = time.perf_counter()
    result = subprocess.run(
        _command(direct), env=_env(home, direct), capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"forgeml train failed ({result.returncode}): {result.stderr[-2000:]}")
    summary = json.loads(result.stdout)
    if summary.get("status") != "FINISHED" or summary.get("steps") != 20:
        raise RuntimeError(f"unexpected summary: {summary}")
    return seconds


def measure(runs: int) -> dict[str, object]:
    """Alternate direct and executor runs; medians and the difference."""
    times: dict[str, list[float]] = {"direct": [], "executor": []}
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        prepare_adult(home).close()
        run_once(home, direct=True)  # warm the page cache and MLflow's first-use work
        for _ in range(runs):
            times["direct"].append(run_once(home, direct=True))
            times["executor"].append(run_once(home, direct=False))
    direct = statistics.median(times["direct"])
    executor = statistics.median(times["executor"])
    return {
        "runs": runs,
        "direct_seconds": times["direct"],
        "executor_seconds": times["executor"],
        "direct_median": direct,
        "executor_median": executor,
        "added_seconds": executor - direct,
        "target_seconds": TARGET_SECONDS,
        "target_met": executor - direct < TARGET_SECONDS,
        "cpus": len(os.sched_getaffinity(0)),
    }


def print_table(figures: dict[str, object]) -> None:
    rows = [
        ("direct (internal mode)", figures["direct_median"]),
        ("through the local executor", figures["executor_median"]),
        ("added", figures["added_seconds"]),
    ]
    print(f"forgeml train, 20 Adult steps, median of {figures['runs']} runs each")
    print(f"{'mode':<30}{'seconds':>10}")
    for name, value in rows:
        print(f"{name:<30}{float(value):>10.2f}")  # type: ignore[arg-type]
    verdict = "met" if figures["target_met"] else "NOT met"
    print(f"target: under {TARGET_SECONDS:g} s added -> {verdict}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = make_parser(__doc__, "2 runs of each mode")
    parser.add_argument("--runs", type=int, default=5, help="runs of each mode")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (and JSON)."""
    args = parse_args(argv)
    figures = measure(2 if args.quick else args.runs)
    print_table(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
