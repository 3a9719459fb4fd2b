from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.conftest import BENCHMARKS


@pytest.mark.slow
def test_the_edge_benchmark_quick_run_measures_runner_server_and_both_precisions() -> None:
    src = BENCHMARKS.parent / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{BENCHMARKS}"}
    env.pop("FORGEML_HOME", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "edge.py"), "--quick", "--json", "--repeats", "5"],
        capture_output=True, text=True, env=env, check=False, cwd=Path(BENCHMARKS.parent),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    adult = figures["adult_mlp"]
    assert adult["server_p50_ms"] > 0
    assert adult["fp32"]["chosen"] == "fp32"
    assert adult["auto"]["agreement"] is not None
    assert adult["auto"]["size_bytes"] <= adult["fp32"]["size_bytes"]
    assert adult["fp32"]["runner_p50_ms"] > 0
