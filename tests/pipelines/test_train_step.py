from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.pipelines.conftest import write_pipeline
from tests.train.conftest import ADULT_CONFIG

Cli = Callable[..., CliResult]

# a few steps of the Adult example, its ONNX export, and a command step naming the model
PIPELINE = f"""
name: adult
params:
  steps: 3
steps:
  - name: train
    kind: train
    config: {ADULT_CONFIG}
    overrides:
      - epochs=null
      - max_steps=${{params.steps}}
      - schedule.warmup_steps=0
      - early_stopping=null
  - name: onnx
    kind: optimize
    model: ${{steps.train.model}}
    mode: onnx
  - name: announce
    kind: command
    argv: [PYTHON, -c, "open('model.txt', 'w').write('${{steps.train.model}}')"]
    outputs: {{model: model.txt}}
"""


@pytest.mark.slow
def test_train_and_optimize_steps_register_models_later_steps_read_and_rerun_cached(
    adult_cli: Cli, tmp_path: Path
) -> None:
    cli = adult_cli
    path = write_pipeline(tmp_path, PIPELINE)

    first = json_out(cli("pipelines", "run", path, "--json"))
    second = json_out(cli("pipelines", "run", path, "--json"))

    train = first["steps"][0]
    assert train["state"] == "SUCCEEDED" and "@v" in train["outputs"]["model"]
    assert (tmp_path / "model.txt").read_text() == train["outputs"]["model"]
    onnx = first["steps"][1]
    assert onnx["state"] == "SUCCEEDED" and onnx["outputs"]["parent"] == train["outputs"]["model"]
    assert [s["cached"] for s in second["steps"]] == [True, True, True]
    assert second["steps"][0]["outputs"] == train["outputs"]
    models = json_out(cli("models", "list", "--json"))
    assert len(models) == 2  # the trained one and its ONNX child; the re-run made none


@pytest.mark.slow
def test_a_train_step_of_two_workers_runs_as_one_gang_of_two(
    adult_cli: Cli, tmp_path: Path
) -> None:
    cli = adult_cli
    path = write_pipeline(
        tmp_path,
        f"""
name: ddp
steps:
  - name: train
    kind: train
    config: {ADULT_CONFIG}
    overrides: [workers=2, epochs=null, max_steps=4, batch_size=64, data.max_rows=2048]
""",
    )

    [step] = json_out(cli("pipelines", "run", path, "--json"))["steps"]

    assert step["state"] == "SUCCEEDED", step["error"]
    [job] = json_out(cli("jobs", "list", "--json"))
    assert (job["kind"], job["workers"]) == ("train", 2)
    shown = json_out(cli("runs", "show", step["outputs"]["run_id"], "--json"))
    assert (shown["status"], shown["config"]["workers"]) == ("FINISHED", 2)
