from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mode", ["full", "quick"])
def test_the_gpu_check_dry_run_checks_its_imports_and_plans_within_8_minutes(mode: str) -> None:
    args = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry-run", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    done = subprocess.run(
        [*args, *(["--quick"] if mode == "quick" else [])],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["mode"] == mode
    assert report["missing"] == []
    assert report["within_budget"] is True
    assert report["budget_s"] <= 480
    steps = {step["name"]: step for step in report["plan"]}
    assert {"peak", "train_cpu_fp32", "train_cuda_bf16", "train_fsdp", "serve"} <= steps.keys()
    has_deepspeed = importlib.util.find_spec("deepspeed") is not None
    assert steps["train_deepspeed_zero3"]["runs"] is has_deepspeed


def test_the_dry_run_never_imports_torch() -> None:
    # the GPU image's imports are checked without loading them: a dry run stays instant
    code = (
        "import sys, runpy; sys.argv = ['gpu_check.py', '--dry-run', '--json'];"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r});"
        "import gpu_check; gpu_check.main(['--dry-run', '--json']);"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )

    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_real_run_without_a_gpu_says_so_in_one_json_error_after_importing_its_rows() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check would run for minutes")
    args = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--quick", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, check=False)

    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout) == {
        "error": "The GPU check needs a CUDA GPU and this machine has none."
    }
