from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.benchmarks.conftest import BENCHMARKS

# numpy's BLAS pool loaded, then one_thread(), then torch imported, and a child started:
# every pool is one thread, the child's from the environment it inherits
PROBE = """
import json, os, subprocess, sys
import numpy
from _cli import THREAD_VARIABLES, one_thread
one_thread()
import torch
from threadpoolctl import threadpool_info
child = subprocess.run(
    [sys.executable, "-c", "import os; print(os.environ['OMP_NUM_THREADS'])"],
    capture_output=True, text=True, check=True,
)
print(json.dumps({
    "torch": torch.get_num_threads(),
    "pools": sorted({pool["num_threads"] for pool in threadpool_info()}),
    "environment": {name: os.environ[name] for name in THREAD_VARIABLES},
    "child": child.stdout.strip(),
}))
"""


def test_one_thread_limits_the_loaded_pools_torch_and_the_processes_started() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["PYTHONPATH"] = str(BENCHMARKS)
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {
        "torch": 1,
        "pools": [1],
        "environment": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                        "MKL_NUM_THREADS": "1"},
        "child": "1",
    }  # fmt: skip
