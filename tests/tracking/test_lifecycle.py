from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

from forgeml.core.config import Settings
from forgeml.core.errors import ConfigError
from forgeml.core.store import DatasetVersion
from forgeml.core.workspace import Workspace
from forgeml.scheduler.contract import Outcome, result_of
from forgeml.tracking import get_run, list_runs, start_run
from forgeml.tracking.lifecycle import RunStopped, tracked_run
from tests.train.conftest import ADULT_CONFIG, QUICK, copy_adult_home, copy_home


def _sigterm_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (ConfigError("Bad key 'x'."), "FAILED", "Bad key 'x'."),
        (RuntimeError("disk on fire"), "FAILED", "RuntimeError: disk on fire"),
        (MemoryError(), "FAILED", "out of memory"),
        (KeyboardInterrupt(), "KILLED", "KeyboardInterrupt"),
        (optuna.TrialPruned("pruned at step 3"), "KILLED", "pruned at step 3"),
        (RunStopped(), "KILLED", "stopped by SIGTERM"),
    ],
)
def test_a_run_ends_by_one_set_of_rules(
    tracking_workspace: Workspace,
    dataset_version: DatasetVersion,
    error: BaseException,
    status: str,
    message: str,
) -> None:
    handle = start_run(tracking_workspace, {}, "rules", dataset_version)

    with pytest.raises(type(error)), tracked_run(handle):
        raise error

    record = get_run(tracking_workspace, handle.run_id)
    assert (record.status, record.error) == (status, message)


def test_a_body_that_returns_finishes_its_run(
    tracking_workspace: Workspace, dataset_version: DatasetVersion
) -> None:
    handle = start_run(tracking_workspace, {}, "fine", dataset_version)

    with tracked_run(handle) as run:
        run.finish({"accuracy": 0.5})

    record = get_run(tracking_workspace, handle.run_id)
    assert (record.status, record.metrics) == ("FINISHED", {"accuracy": 0.5})


def test_sigterm_interrupts_a_body_that_cannot_checkpoint(
    tracking_workspace: Workspace, dataset_version: DatasetVersion
) -> None:
    previous = signal.getsignal(signal.SIGTERM)
    handle = start_run(tracking_workspace, {}, "stop", dataset_version)
    reached = []

    with pytest.raises(RunStopped), tracked_run(handle):
        _sigterm_self()
        reached.append("after the signal")

    assert reached == []
    assert signal.getsignal(signal.SIGTERM) is previous
    assert get_run(tracking_workspace, handle.run_id).status == "KILLED"


def test_sigterm_asks_a_checkpointing_body_to_stop_and_it_decides(
    tracking_workspace: Workspace, dataset_version: DatasetVersion
) -> None:
    handle = start_run(tracking_workspace, {}, "checkpoint", dataset_version)

    with tracked_run(handle, checkpoints=True) as run:
        assert not run.should_stop()
        _sigterm_self()
        assert run.should_stop()
        run.kill({"step": 4}, "preempted: checkpoint written")

    record = get_run(tracking_workspace, handle.run_id)
    assert (record.status, record.error) == ("KILLED", "preempted: checkpoint written")


# ---- SIGTERM ends train, tune and optimize alike: runs KILLED, the job PREEMPTED


@pytest.fixture
def adult(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = copy_adult_home(tmp_path_factory, tmp_path / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    yield workspace
    workspace.close()


SMALL = [*QUICK[1::2], "max_steps=12", "batch_size=64", "data.max_rows=2048"]


def _statuses(workspace: Workspace) -> list[tuple[str, str | None]]:
    return sorted((run.status, run.error) for run in list_runs(workspace))


def test_sigterm_during_training_kills_the_run_and_preempts_the_job(adult: Workspace) -> None:
    from forgeml.tracking import runner
    from forgeml.tracking.jobs import TrainJobSpec, train_job
    from forgeml.train.config import load_config

    config = load_config(str(ADULT_CONFIG), SMALL)
    spec = TrainJobSpec(config=config.model_dump(mode="json"))
    real = runner.run_training

    def sigterm_at_step_3(*args: Any, **kwargs: Any) -> Any:
        kwargs["progress"] = lambda step, *_: _sigterm_self() if step == 3 else None
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "run_training", sigterm_at_step_3)
        result = result_of(lambda: train_job(adult, spec, None))

    assert result.outcome == Outcome.PREEMPTED
    assert result.outputs["status"] == "PREEMPTED"
    assert _statuses(adult) == [("KILLED", "preempted: checkpoint written")]


def test_sigterm_during_a_trial_kills_the_trial_and_the_study(
    adult: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    from forgeml.tracking import tuning
    from forgeml.tracking.jobs import TuneJobSpec, tune_job

    data = yaml.safe_load(ADULT_CONFIG.read_text())
    data["search"] = {"optimizer.lr": {"type": "loguniform", "low": 1.0e-4, "high": 1.0e-2}}
    data["tune"] = {"metric": "accuracy", "direction": "maximize", "pruner": "none"}
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(data))
    real = tuning.run_training

    def sigterm_at_step_3(*args: Any, **kwargs: Any) -> Any:
        report = kwargs["progress"]

        def progress(step: int, total: int, metrics: dict[str, float]) -> None:
            report(step, total, metrics)
            if step == 3:
                _sigterm_self()

        return real(*args, **(kwargs | {"progress": progress}))

    monkeypatch.setattr(tuning, "run_training", sigterm_at_step_3)
    spec = TuneJobSpec(config_path=str(path), trials=3, overrides=SMALL)

    result = result_of(lambda: tune_job(adult, spec))

    assert result.outcome == Outcome.PREEMPTED
    assert _statuses(adult) == [
        ("KILLED", "preempted: checkpoint written"),
        ("KILLED", "stopped by SIGTERM during trial 0"),
    ]


@pytest.mark.slow
def test_sigterm_during_an_optimisation_kills_its_run_and_registers_nothing(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.optimize import pipeline
    from forgeml.optimize.job import OptimizeJobSpec, optimize_job
    from forgeml.tracking import list_models
    from tests.train.conftest import trained_adult_template

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = copy_home(trained_adult_template(tmp_path_factory), tmp_path / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    before = {run.id for run in list_runs(workspace)}
    models = [m.ref for m in list_models(workspace)]
    real = pipeline.version_metrics

    def sigterm_first(report: dict[str, Any]) -> dict[str, Any]:
        _sigterm_self()
        return real(report)

    monkeypatch.setattr(pipeline, "version_metrics", sigterm_first)
    spec = OptimizeJobSpec(model_ref="adult-mlp@v1", request={"mode": "onnx", "latency_repeats": 1})
    try:
        result = result_of(lambda: optimize_job(workspace, spec))
        runs = [run for run in list_runs(workspace) if run.id not in before]
        assert result.outcome == Outcome.PREEMPTED
        assert [(run.status, run.error) for run in runs] == [("KILLED", "stopped by SIGTERM")]
        assert [m.ref for m in list_models(workspace)] == models
    finally:
        workspace.close()
