from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.benchmarks.conftest import BENCHMARKS


def test_the_quick_run_is_small_and_the_full_run_is_issue_16s() -> None:
    from ui_curves import parse_args

    quick = parse_args(["--quick"])
    assert (quick.runs, quick.steps, quick.rounds) == (10, 1_000, 3)
    full = parse_args([])
    assert (full.runs, full.steps) == (100, 10_000)


def test_a_run_count_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from ui_curves import parse_args

    with pytest.raises(SystemExit) as stopped:
        parse_args(["--runs", "0"])
    assert stopped.value.code == 2
    assert "at least 1" in capsys.readouterr().err


def test_a_small_run_downsamples_every_curve_to_the_charts_width() -> None:
    env = {**os.environ, "PYTHONPATH": f"{BENCHMARKS.parent / 'src'}{os.pathsep}{BENCHMARKS}"}
    env.pop("FORGEML_HOME", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "ui_curves.py"), "--runs", "3", "--steps", "1500",
         "--rounds", "2", "--json"],
        capture_output=True, text=True, env=env, check=False, cwd=BENCHMARKS.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    assert (figures["runs"], figures["steps"], figures["points_per_curve"]) == (3, 1_500, 960)
    assert len(figures["first_view_ms"]) == 2
    assert figures["first_view_median_ms"] > 0
    assert figures["mlflow_points_per_curve"] == 1_500  # the peer reads every point
    assert len(figures["mlflow_client_ms"]) == 2 and figures["mlflow_client_median_ms"] > 0
    assert "3 runs x 1500 steps" in done.stdout
