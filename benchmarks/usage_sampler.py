"""What one usage sample costs: `ProcessTreeSampler.sample()` on a small process tree.

The local and Ray executors sample every attempt's process tree (CPU, memory, GPU) while
it runs, so a sample must stay cheap. What is measured: the wall time of one `sample()`
over a tree of two idle Python processes (a root and the child it waits for), no GPU
watched; the median and p90 of `--samples` calls. Target: median under 5 ms.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/usage_sampler.py            # 500 samples
    PYTHONPATH=src .venv/bin/python benchmarks/usage_sampler.py --quick    # 50 samples
    PYTHONPATH=src .venv/bin/python benchmarks/usage_sampler.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from _cli import make_parser, print_json
from forgeml.scheduler._usage import ProcessTreeSampler

TARGET_SECONDS = 0.005
# a root waiting on a child; both live until the root's stdin closes
TREE = (
    "import subprocess, sys\n"
    "subprocess.run([sys.executable, '-c', 'import sys; print(flush=True); sys.stdin.read()'])\n"
)


def measure(samples: int) -> dict[str, object]:
    """Time `samples` calls of `sample()` over the two-process tree."""
    root = subprocess.Popen(
        [sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert root.stdout is not None
        root.stdout.readline()  # the child is up
        sampler = ProcessTreeSampler(root.pid, gpus=())
        durations = []
        for _ in range(samples):
            started = time.perf_counter()
            sampler.sample()
            durations.append(time.perf_counter() - started)
    finally:
        assert root.stdin is not None
        root.stdin.close()
        root.wait(30)
        if root.stdout is not None:
            root.stdout.close()
    median = statistics.median(durations)
    return {
        "samples": samples,
        "median_seconds": median,
        "p90_seconds": statistics.quantiles(durations, n=10)[-1],
        "target_seconds": TARGET_SECONDS,
        "target_met": median < TARGET_SECONDS,
        "cpus": len(os.sched_getaffinity(0)),
    }


def print_table(figures: dict[str, object]) -> None:
    print(f"ProcessTreeSampler.sample(), two-process tree, {figures['samples']} samples")
    for name in ("median_seconds", "p90_seconds"):
        print(f"{name.removesuffix('_seconds'):<8}{float(figures[name]) * 1000:>8.2f} ms")  # type: ignore[arg-type]
    verdict = "met" if figures["target_met"] else "NOT met"
    print(f"target: median under {TARGET_SECONDS * 1000:g} ms -> {verdict}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = make_parser(__doc__, "50 samples")
    parser.add_argument("--samples", type=int, default=500, help="samples to time")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (and JSON)."""
    args = parse_args(argv)
    figures = measure(50 if args.quick else args.samples)
    print_table(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
