from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.pipelines.conftest import write_pipeline
from tests.train.conftest import ADULT_CONFIG

Cli = Callable[..., CliResult]

# the train, optimize (ONNX) and command steps of one pipeline, their cache and the models
# they register are tested with the other kinds in one pipeline run (one train job):
# test_model_kinds.py::test_train_optimize_command_finetune_tune_and_evaluate_steps_run_...


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
