from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from forgeml.core.config import Settings
from forgeml.core.errors import ConfigError
from forgeml.core.workspace import Workspace
from forgeml.tracking import get_run, list_models, list_runs, open_client
from forgeml.tracking.tuning import run_tuning
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.train.conftest import ADULT_CONFIG, copy_adult_home, forgeml_command, subprocess_env

Cli = Callable[..., CliResult]
SEARCH = {"optimizer.lr": {"type": "loguniform", "low": 1.0e-4, "high": 1.0e-2}}
# every trial short: the Adult example config, cut to a few steps on 2,048 rows
SMALL = ["epochs=null", "max_steps=15", "batch_size=64", "data.max_rows=2048"]


def small_args(*extra: str) -> list[str]:
    return [a for item in [*SMALL, *extra] for a in ("--set", item)]


def write_tune_config(folder: Path, name: str = "tune.yaml", **sections: Any) -> Path:
    """The Adult train config plus `search` and `tune` sections (or `sections` instead)."""
    data = yaml.safe_load(ADULT_CONFIG.read_text())
    data.update({"search": SEARCH, "tune": {"metric": "accuracy", "direction": "maximize"}})
    data.update(sections)
    data = {key: value for key, value in data.items() if value is not None}
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def adult(
    cli: Cli,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    """The `cli` fixture on a copy of the prepared Adult workspace, tuning in-process.

    `FORGEML_JOB_ID` makes `forgeml tune` run its study directly, as it does inside a
    scheduler job, instead of starting a job process per study; `through_scheduler` keeps
    the job path (tests/cli/test_train_cli.py explains the choice).
    """
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("FORGEML_JOB_ID", "in-process")
    monkeypatch.delenv("FORGEML_JOB_DIR", raising=False)
    copy_adult_home(tmp_path_factory, tmp_path / "home")
    return cli


@pytest.fixture
def through_scheduler(adult: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`adult`, but `forgeml tune` records a job and runs it through the local executor."""
    monkeypatch.delenv("FORGEML_JOB_ID")
    return adult


def workspace_of(tmp_path: Path) -> Workspace:
    return Workspace(Settings(home=tmp_path / "home", user="tester"))


def test_tune_runs_trials_as_child_runs_and_registers_the_best(
    through_scheduler: Cli, tmp_path: Path
) -> None:
    adult = through_scheduler
    path = write_tune_config(tmp_path)

    result = json_out(adult("tune", path, "--trials", "3", *small_args(), "--json"))
    jobs = json_out(adult("jobs", "list", "--json"))
    assert [(job["kind"], job["state"]) for job in jobs] == [("tune", "SUCCEEDED")]

    assert result["study"] == "adult-mlp-study"
    assert result["metric"] == "accuracy"
    assert [t["state"] for t in result["trials"]] == ["COMPLETE"] * 3
    values = [t["value"] for t in result["trials"]]
    assert result["best_value"] == max(values)
    assert all(1e-4 <= t["params"]["optimizer.lr"] <= 1e-2 for t in result["trials"])
    study = get_run(workspace_of(tmp_path), result["study_run"])
    assert (study.name, study.status) == ("adult-mlp-study", "FINISHED")
    assert study.metrics == {"best_accuracy": result["best_value"]}
    assert study.config["search"]["params"]["optimizer.lr"]["type"] == "loguniform"

    children = json_out(adult("runs", "list", "--name", "adult-mlp", "--json"))
    assert len(children) == 3
    assert {c["parent_run_id"] for c in children} == {result["study_run"]}
    assert all(c["status"] == "FINISHED" for c in children)
    by_lr = {
        json_out(adult("runs", "show", c["run_id"], "--json"))["config"]["optimizer"]["lr"]: c
        for c in children
    }
    assert sorted(by_lr) == sorted(t["params"]["optimizer.lr"] for t in result["trials"])
    best = json_out(adult("runs", "show", result["best_run"], "--json"))
    assert best["parent_run_id"] == result["study_run"]
    assert best["metrics"]["accuracy"] == result["best_value"]
    assert best["config"]["optimizer"]["lr"] == result["best_params"]["optimizer.lr"]
    assert best["config"]["data"]["max_rows"] == 2048  # --set reaches every trial

    # the pruner saw every trial's training-loss curve, one point a step
    import optuna

    from forgeml.train.hpo import optuna_storage

    stored = optuna.load_study(
        study_name="adult-mlp-study",
        storage=optuna_storage(workspace_of(tmp_path).settings.database_url),
    )
    assert [sorted(t.intermediate_values) for t in stored.trials] == [list(range(1, 16))] * 3

    assert result["model"] == "adult-mlp@v1"
    [model] = json_out(adult("models", "list", "--json"))
    assert (model["ref"], model["run_id"], model["dataset"]) == (
        "adult-mlp@v1",
        result["best_run"],
        "adult@v4",
    )
    assert model["metrics"]["accuracy"] == result["best_value"]
    tags = open_client(workspace_of(tmp_path)).get_run(result["best_run"]).data.tags
    assert tags["mlflow.parentRunId"] == result["study_run"]


def test_tune_for_people_names_the_best_trial_and_its_model(adult: Cli, tmp_path: Path) -> None:
    path = write_tune_config(tmp_path)

    result = adult("tune", path, "--trials", "2", *small_args())

    assert_ok(result)
    assert "study adult-mlp-study: best accuracy = " in result.stdout
    assert "optimizer.lr" in result.stdout
    assert "registered as adult-mlp@v1" in result.stdout


def test_without_register_best_no_model_is_registered(adult: Cli, tmp_path: Path) -> None:
    path = write_tune_config(
        tmp_path, tune={"metric": "loss", "direction": "minimize", "register_best": False}
    )

    result = json_out(adult("tune", path, "--trials", "2", *small_args(), "--json"))

    assert result["model"] is None
    assert result["best_run"] is not None
    assert result["best_value"] == min(t["value"] for t in result["trials"])
    assert json_out(adult("models", "list", "--json")) == []


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"search": None}, "missing required key 'search'"),
        ({"tune": {"metric": "accuracy", "direction": "up"}}, "'direction'"),
        ({"tune": {"metric": "accuracy", "sampler": "grid"}}, "'sampler'"),
        ({"search": {"optimizer.lr": {"type": "loguniform", "low": 1, "high": 0.1}}}, "low"),
    ],
)
def test_bad_tune_configs_name_the_file_and_start_no_study(
    adult: Cli, tmp_path: Path, sections: dict[str, Any], expected: str
) -> None:
    path = write_tune_config(tmp_path, **sections)

    result = adult("tune", path, "--trials", "2", *small_args())

    assert_cli_error(result, expected)
    assert str(path) in result.stderr
    assert json_out(adult("runs", "list", "--json")) == []


def test_a_tune_metric_the_runs_do_not_report_fails_the_study(adult: Cli, tmp_path: Path) -> None:
    path = write_tune_config(tmp_path, tune={"metric": "bleu", "direction": "maximize"})

    result = adult("tune", path, "--trials", "2", *small_args())

    # Optuna's trial-failure log comes first (see the xfail test at the end of this file)
    assert result.code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: Metric 'bleu' is not among the run's final metrics (")
    assert "accuracy" in last
    study = json_out(adult("runs", "list", "--name", "adult-mlp-study", "--json"))
    assert [s["status"] for s in study] == ["FAILED"]
    assert json_out(adult("models", "list", "--json")) == []


def test_zero_trials_is_refused(adult: Cli, tmp_path: Path) -> None:
    result = adult("tune", write_tune_config(tmp_path), "--trials", "0", *small_args())

    assert_cli_error(result, "--trials must be at least 1")
    assert json_out(adult("models", "list", "--json")) == []


def test_a_study_continued_with_the_other_direction_is_refused(adult: Cli, tmp_path: Path) -> None:
    first = write_tune_config(tmp_path)
    assert_ok(adult("tune", first, "--trials", "1", *small_args(), "--json"))
    other = write_tune_config(
        tmp_path, "other.yaml", tune={"metric": "accuracy", "direction": "minimize"}
    )

    result = adult("tune", other, "--trials", "1", *small_args())

    assert_cli_error(result, "exists and is to maximize")


def test_run_tuning_from_the_sdk(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    copy_adult_home(tmp_path_factory, tmp_path / "home")
    workspace = workspace_of(tmp_path)
    path = write_tune_config(tmp_path, tune={"metric": "loss", "direction": "minimize"})
    try:
        result = run_tuning(workspace, str(path), 2, SMALL)
        with pytest.raises(ConfigError, match=r"unknown key 'optimizer\.lrr'"):
            run_tuning(workspace, str(path), 1, [*SMALL, "optimizer.lrr=1"])
    finally:
        workspace.close()

    trials = list_runs(workspace, parent_run_id=result["study_run"])
    assert len(trials) == 2
    assert [m.ref for m in list_models(workspace)] == ["adult-mlp@v1"]


def test_a_continued_study_still_names_its_best_trials_run(adult: Cli, tmp_path: Path) -> None:
    good = write_tune_config(
        tmp_path, search={"optimizer.lr": {"type": "loguniform", "low": 3e-3, "high": 3e-2}}
    )
    # same name, so the same study; learning rates too small to learn anything
    poor = write_tune_config(
        tmp_path,
        "poor.yaml",
        search={"optimizer.lr": {"type": "loguniform", "low": 1e-8, "high": 1e-7}},
    )
    first = json_out(adult("tune", good, "--trials", "2", *small_args(), "--json"))

    second = json_out(adult("tune", poor, "--trials", "1", *small_args(), "--json"))

    assert len(second["trials"]) == 3
    assert second["best_value"] == first["best_value"]  # the best trial is from the first call
    assert second["best_run"] == first["best_run"]


@pytest.mark.slow
def test_a_search_key_that_is_not_a_config_key_is_one_sentence(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = write_tune_config(
        tmp_path, search={"optimizer.lrr": {"type": "float", "low": 0.1, "high": 0.2}}
    )
    home = copy_adult_home(tmp_path_factory, tmp_path / "home")

    done = subprocess.run(
        forgeml_command("tune", str(path), "--trials", "1", *small_args()),
        capture_output=True,
        text=True,
        env=subprocess_env(home),
        timeout=300,
        check=False,
    )

    assert done.returncode == 1
    assert "optimizer.lrr" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
