from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.conftest import BENCHMARKS


@pytest.mark.slow
def test_the_explain_benchmark_quick_run_measures_forgeml_and_its_peers() -> None:
    src = BENCHMARKS.parent / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{BENCHMARKS}"}
    env.pop("FORGEML_HOME", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "explain.py"), "--quick", "--json"],
        capture_output=True, text=True, env=env, check=False, cwd=Path(BENCHMARKS.parent),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    shap = figures["kernel_shap"]
    assert shap["fields"] == 14 and shap["encoded_columns"] > shap["fields"]
    assert shap["peer_background_rows"] == 100 and shap["forgeml_background_rows"] == 50
    assert shap["forgeml_s_per_row"] > 0 and shap["peer_s_per_row"] > 0
    for key in ("ig_adult_mlp", "ig_minilm"):
        assert figures[key]["forgeml_ms"] > 0 and figures[key]["peer_ms"] > 0
    text = figures["ig_minilm"]
    assert text["median_tokens"] > 5  # real sentences, not the label column
    assert text["precision"] in ("bf16", "fp32") and 0 <= text["top_word_as_fp32"] <= text["texts"]
    assert text["max_abs_convergence_delta"] < 0.02 and text["forgeml_fp32_ms"] > 0
