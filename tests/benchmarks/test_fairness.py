from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.conftest import BENCHMARKS
from tests.train.conftest import copy_home, trained_adult_template


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    src = BENCHMARKS.parent / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{BENCHMARKS}"}
    env.pop("FORGEML_HOME", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / "fairness.py"), *args],
        capture_output=True, text=True, env=env, check=False, cwd=BENCHMARKS.parent,
    )  # fmt: skip


@pytest.fixture
def trained_home(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of tests/train's trained Adult workspace (adult-mlp@v1, slices sex and race)."""
    return copy_home(trained_adult_template(tmp_path_factory), tmp_path / "home")


@pytest.mark.slow
def test_the_fairness_benchmark_quick_run_measures_forgeml_and_fairlearn(
    trained_home: Path,
) -> None:
    home = trained_home
    done = _run("--quick", "--json", "--home", str(home), "--model", "adult-mlp@v1")
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["model"] == "adult-mlp@v1" and figures["quick"] is True
    assert set(figures["load_average_1min"]) == {"start", "end"}

    report = figures["report"]
    assert report["columns"] == ["sex", "race"] and report["values_compared"] == 8
    assert report["max_abs_difference"] < 1e-12  # forgeml's report is fairlearn's numbers
    assert report["forgeml_ms"] > 0 and report["peer_ms"] > 0

    sex, race = figures["mitigation"]["sex"], figures["mitigation"]["race"]
    assert sex["constraint"] == "demographic_parity" and race["constraint"] == "equalized_odds"
    assert sex["after_served"]["dp_diff"] < sex["before"]["dp_diff"]
    assert (
        sex["recorded"]["validation_after"]["dp_diff"]
        < sex["recorded"]["validation_before"]["dp_diff"]
    )
    assert (
        race["recorded"]["validation_after"]["eo_diff"]
        < race["recorded"]["validation_before"]["eo_diff"]
    )
    for found in (sex, race):
        assert found["agreement_same_draws"] == 1.0  # the served rules are fairlearn's
        assert 0.5 < found["agreement_seeded"] <= 1.0
        assert found["max_abs_probability_difference"] < 1e-6
        assert 0 <= found["randomised_share"] <= 1
        assert found["before"]["accuracy"] > 0.7 and found["after_served"]["accuracy"] > 0.6
        assert min(found["per_1k_ms"].values()) > 0
        assert found["model"].startswith("adult-mlp@v")
    assert sex["gate"]["after_passed"] and not sex["gate"]["before_passed"]


def test_the_fairness_benchmark_refuses_a_model_without_its_workspace() -> None:
    done = _run("--quick", "--model", "adult-mlp@v1")
    assert done.returncode == 2
    assert "--home and --model go together." in done.stderr
