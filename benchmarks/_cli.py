"""The command line every benchmark shares: `--quick`, `--json`, and one JSON object last.

Each benchmark prints its table for a reader, then, with `--json`, its figures as one JSON
object on the last line, which is what benchmarks/peers.py and the README's runs read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

# the thread pools a process's numerical libraries size from these when they load
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def make_parser(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """A parser described by the first line of the benchmark's docstring (`doc`), with
    `--quick` (`quick` says what it shortens) and `--json`; the benchmark adds its own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser


def print_json(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    """With `--json`, print `figures` as one JSON object on one line (what JSON cannot
    hold, a path or a timestamp, as its text); without it, nothing."""
    if args.json:
        print(json.dumps(figures, default=str))


def one_thread() -> None:
    """One thread for the BLAS and OpenMP pools of this process (and of the processes it
    starts, through the environment) and for torch's, which `--quick` runs use.

    On a shared 2-core machine a pool of two threads waits on the slower one's turn at a
    core: a LogisticRegression fit of Adult's size and 200 steps of an MLP took 1.0 s of
    wall time with one thread and 7 to 13 s with two at a load average of 13 (and 20 times
    the CPU time, spent spinning). The full runs keep the libraries' defaults.
    """
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # pools already loaded (numpy imported at a module's top)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
