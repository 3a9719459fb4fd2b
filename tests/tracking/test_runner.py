from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import torch

from forgeml.core.config import Settings
from forgeml.core.errors import ForgemlError, UsageError
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.tracking import (
    download_bundle,
    finish_run,
    get_run,
    list_models,
    open_client,
    start_run,
)
from forgeml.tracking.runner import (
    CONFIG_FILE,
    WorkerFailedError,
    dataset_version_for,
    run_dir_for,
    run_training,
)
from forgeml.train.config import TrainConfig, load_config
from forgeml.train.data import load_task_data
from forgeml.train.recipe import load_bundle_model
from tests.tracking.conftest import audit_actions
from tests.train.conftest import ADULT_CONFIG, QUICK, copy_adult_home

STEPS = 12


@pytest.fixture
def adult(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    """A private copy of the prepared Adult workspace, opened through the SDK."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = copy_adult_home(tmp_path_factory, tmp_path / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    yield workspace
    workspace.close()


def config(*overrides: str) -> TrainConfig:
    base = [*QUICK[1::2], f"max_steps={STEPS}", "batch_size=64", "data.max_rows=2048"]
    return load_config(str(ADULT_CONFIG), [*base, *overrides])


def split_version(workspace: Workspace) -> catalog.DatasetVersion:
    with workspace.store.session() as session:
        return catalog.resolve(session, "adult@v4")


def test_a_run_is_tracked_registered_and_its_lineage_recorded(adult: Workspace) -> None:
    summary = run_training(adult, config())

    assert (summary.status, summary.steps, summary.preempted) == ("FINISHED", STEPS, False)
    model = summary.model
    assert model is not None
    assert (model.name, model.version, model.run_id, model.parent) == (
        "adult-mlp",
        1,
        summary.run_id,
        None,
    )
    version = split_version(adult)
    assert version.recipe["op"] == "split"
    assert model.dataset_version_id == version.id
    assert model.metrics == summary.metrics
    record = get_run(adult, summary.run_id)
    assert (record.status, record.dataset_version_id, record.error) == (
        "FINISHED",
        version.id,
        None,
    )
    assert record.metrics["accuracy"] == summary.metrics["accuracy"]
    assert TrainConfig.model_validate(record.config) == config()

    client = open_client(adult)
    run = client.get_run(summary.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["forgeml.dataset"] == "adult@v4"
    assert run.data.tags["forgeml.model_digest"] == model.artifact_digest
    assert run.data.params["max_steps"] == str(STEPS)
    assert run.data.metrics["accuracy"] == pytest.approx(summary.metrics["accuracy"])
    assert run.inputs is not None
    [dataset_input] = run.inputs.dataset_inputs
    assert dataset_input.dataset.digest == version.digest[:36]
    artifacts = {a.path for a in client.list_artifacts(summary.run_id, "model")}
    assert {"model/model.json", "model/model.safetensors", "model/feature_spec.json"} <= artifacts
    registered = client.get_model_version("adult-mlp", "1")
    assert registered.run_id == summary.run_id
    assert registered.tags["forgeml.artifact_digest"] == model.artifact_digest
    assert audit_actions(adult, summary.run_id) == ["run.start", "run.finish"]
    assert audit_actions(adult, "adult-mlp@v1") == ["model.register"]


def test_the_registered_bundle_reproduces_the_runs_metrics(
    adult: Workspace, tmp_path: Path
) -> None:
    trained = config("optimizer.lr=0.01")
    summary = run_training(adult, trained)
    assert summary.model is not None

    bundle = download_bundle(adult, summary.model, tmp_path / "bundle")
    model = load_bundle_model(bundle)
    validation = load_task_data(adult, trained).eval
    assert validation is not None
    with torch.no_grad():
        predicted = model(**validation.inputs).argmax(dim=-1)

    accuracy = (predicted == validation.targets).float().mean().item()
    assert accuracy == pytest.approx(summary.metrics["accuracy"], abs=1e-6)
    assert json.loads((bundle / "model.json").read_text())["class_names"] == ["<=50K", ">50K"]


def test_the_run_folder_holds_the_config_the_checkpoints_and_the_bundle(
    adult: Workspace,
) -> None:
    trained = config("checkpoint.every_steps=5", "checkpoint.keep=2")
    summary = run_training(adult, trained)

    folder = run_dir_for(adult, summary.run_id)
    assert folder == adult.settings.home / "runs" / summary.run_id
    assert TrainConfig.model_validate_json((folder / CONFIG_FILE).read_text()) == trained
    checkpoints = sorted(p.name for p in (folder / "checkpoints").glob("step-*"))
    assert checkpoints == ["step-000010", "step-000012"]
    assert (folder / "checkpoints" / "latest").read_text().strip() == "step-000012"
    assert (folder / "bundle" / "model.safetensors").is_file()


def test_progress_is_reported_after_every_step(adult: Workspace) -> None:
    seen: list[tuple[int, int, dict[str, float]]] = []

    run_training(adult, config(), progress=lambda *report: seen.append(report))

    assert [(step, total) for step, total, _ in seen] == [(s, STEPS) for s in range(1, STEPS + 1)]
    assert all({"train_loss", "lr", "samples_per_s"} <= set(m) for _, _, m in seen)


def test_without_register_model_nothing_is_registered(adult: Workspace) -> None:
    summary = run_training(adult, config("register_model=false"))

    assert (summary.status, summary.model) == ("FINISHED", None)
    assert list_models(adult) == []
    assert "accuracy" in get_run(adult, summary.run_id).metrics


def test_a_trial_run_records_its_parent_run(adult: Workspace) -> None:
    study = start_run(adult, {}, "adult-study", dataset_version_for(adult, config()))
    try:
        summary = run_training(adult, config("register_model=false"), parent_run_id=study.run_id)
    finally:
        finish_run(study, "FINISHED", {})

    assert get_run(adult, summary.run_id).parent_run_id == study.run_id
    tags = open_client(adult).get_run(summary.run_id).data.tags
    assert tags["mlflow.parentRunId"] == study.run_id


def _sigterm_at(step: int) -> Any:
    def progress(done: int, _total: int, _metrics: dict[str, float]) -> None:
        if done == step:
            os.kill(os.getpid(), signal.SIGTERM)

    return progress


def test_sigterm_preempts_with_a_checkpoint_and_resume_matches_an_unbroken_run(
    adult: Workspace,
) -> None:
    previous = signal.getsignal(signal.SIGTERM)
    trained = config("checkpoint.every_steps=100", "eval_every_steps=4", "early_stopping=null")

    stopped = run_training(adult, trained, progress=_sigterm_at(5))

    assert signal.getsignal(signal.SIGTERM) is previous  # the handler is put back
    assert (stopped.status, stopped.preempted, stopped.model) == ("PREEMPTED", True, None)
    assert 5 <= stopped.steps < STEPS
    record = get_run(adult, stopped.run_id)
    assert (record.status, record.error) == ("KILLED", "preempted: checkpoint written")
    assert open_client(adult).get_run(stopped.run_id).info.status == "KILLED"
    latest = run_dir_for(adult, stopped.run_id) / "checkpoints" / "latest"
    assert latest.read_text().strip() == f"step-{stopped.steps:06d}"

    resumed = run_training(adult, trained, resume=stopped.run_id)
    unbroken = run_training(adult, trained)

    assert (resumed.run_id, resumed.status, resumed.steps) == (stopped.run_id, "FINISHED", STEPS)
    assert resumed.model is not None and resumed.model.version == 1
    for key, value in unbroken.metrics.items():
        if isinstance(value, float):
            assert resumed.metrics[key] == pytest.approx(value, abs=1e-4), key
    assert get_run(adult, stopped.run_id).status == "FINISHED"


def _raise_at(step: int, error: BaseException) -> Any:
    def progress(done: int, _total: int, _metrics: dict[str, float]) -> None:
        if done == step:
            raise error

    return progress


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (KeyboardInterrupt(), "KILLED", "KeyboardInterrupt"),
        (RuntimeError("disk on fire"), "FAILED", "RuntimeError: disk on fire"),
        (MemoryError(), "FAILED", "out of memory"),
        (optuna.TrialPruned("pruned at step 3"), "KILLED", "pruned at step 3"),
    ],
)
def test_an_interrupted_or_crashed_run_is_ended_in_both_stores_and_registers_nothing(
    adult: Workspace, error: BaseException, status: str, message: str
) -> None:
    with pytest.raises(type(error)):
        run_training(adult, config(), progress=_raise_at(3, error))

    [record] = [r for r in _runs(adult)]
    assert (record.status, record.error) == (status, message)
    assert record.ended_at is not None
    assert open_client(adult).get_run(record.id).info.status == status
    assert list_models(adult) == []


def _runs(workspace: Workspace) -> list[Any]:
    from forgeml.tracking import list_runs

    return list_runs(workspace)


def test_a_failing_run_is_recorded_failed_with_its_sentence(adult: Workspace) -> None:
    with pytest.raises(ForgemlError) as caught:
        run_training(adult, config("data.slices=[nosuch]"))

    [record] = _runs(adult)
    assert (record.status, record.error) == ("FAILED", str(caught.value))
    assert "nosuch" in record.error
    assert list_models(adult) == []


def test_an_unknown_dataset_records_no_run(adult: Workspace) -> None:
    with pytest.raises(ForgemlError, match="Dataset 'nosuch' does not exist"):
        run_training(adult, config("data.dataset=nosuch"))

    assert _runs(adult) == []


def test_a_run_that_is_still_alive_cannot_be_resumed(adult: Workspace) -> None:
    alive = start_run(adult, config().model_dump(mode="json"), "adult-mlp", None)
    try:
        with pytest.raises(UsageError, match="is still running"):
            run_training(adult, config(), resume=alive.run_id)
    finally:
        finish_run(alive, "FINISHED", {})

    assert get_run(adult, alive.run_id).status == "FINISHED"


@pytest.mark.slow
def test_a_failing_distributed_run_is_recorded_failed(
    adult: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGEML_HOME", str(adult.settings.home))  # what the workers open

    with pytest.raises(WorkerFailedError, match="nosuch"):
        run_training(adult, config("workers=2", "data.slices=[nosuch]"))

    [record] = _runs(adult)
    assert record.status == "FAILED"
    assert open_client(adult).get_run(record.id).info.status == "FAILED"
    assert list_models(adult) == []


@pytest.mark.slow
def test_a_distributed_run_trains_on_the_workspace_it_was_given(
    adult: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.core.config import get_settings

    monkeypatch.setenv("FORGEML_HOME", str(tmp_path / "elsewhere"))
    get_settings.cache_clear()

    summary = run_training(adult, config("workers=2", "max_steps=4"))

    assert (summary.status, summary.steps) == ("FINISHED", 4)
