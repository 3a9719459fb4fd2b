from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_labelling_benchmark_measures_both_orders_on_adult(shared_data: Path) -> None:
    args = [sys.executable, str(ROOT / "benchmarks" / "labelling.py"), "--quick", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [*args, "--datasets", "adult"],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    (adult,) = report["results"]
    assert report["mode"] == "quick"
    assert adult["budgets"] == list(range(20, 201, 20))
    for order in ("entropy", "random"):
        curve = adult["accuracy"][order]
        assert len(curve) == len(adult["budgets"])
        # logistic regression on a few hundred Adult labels: well above the 76% majority
        assert 0.78 < curve[-1] < 0.87
    assert adult["target_accuracy"] == adult["accuracy"]["random"][-1]
    curves = adult["accuracy"]
    gains = [a - r for a, r in zip(curves["entropy"], curves["random"], strict=True)]
    assert adult["mean_gain"] == pytest.approx(sum(gains[1:]) / len(gains[1:]))


def test_an_unknown_dataset_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "labelling.py"), "--datasets", "mnist"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown dataset mnist" in done.stderr
