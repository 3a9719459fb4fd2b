from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

import forgeml
from forgeml.core.code import git_commit
from forgeml.core.errors import InvalidNameError, NotFoundError, UsageError
from forgeml.core.store import Dataset, DatasetVersion, RunRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking import (
    RunStatus,
    TrackingUnavailableError,
    attach_run,
    finish_run,
    get_run,
    list_runs,
    resume_run,
    start_run,
)
from forgeml.tracking._context import config_params, environment
from forgeml.tracking._mlflow import MAX_PARAM_VALUE_LENGTH, open_client, sanitize_key
from tests.data.conftest import assert_one_sentence
from tests.tracking.conftest import audit_actions

REPO = Path(__file__).resolve().parents[2]
CONFIG: dict[str, Any] = {
    "name": "toy-mlp",
    "model": {"name": "mlp", "params": {"hidden": [8, 4]}},
    "optimizer": {"name": "adamw", "lr": 0.001},
    "seed": 7,
}


def test_start_run_records_the_run_in_forgeml_and_mlflow(
    tracking_workspace: Workspace, dataset_version: DatasetVersion
) -> None:
    handle = start_run(tracking_workspace, CONFIG, "toy-mlp", dataset_version)
    try:
        record = get_run(tracking_workspace, handle.run_id)
        assert record.status == "RUNNING"
        assert record.config == CONFIG
        assert record.dataset_version_id == dataset_version.id
        assert (record.pid, record.host) == (os.getpid(), socket.gethostname())
        assert record.experiment == "toy-mlp"
        assert record.created_by == "tester"

        run = handle.client.get_run(handle.run_id)
        assert run.info.status == "RUNNING"
        assert run.info.run_name == "toy-mlp"
        assert run.data.params == {
            "name": "toy-mlp",
            "model.name": "mlp",
            "model.params.hidden": "[8, 4]",
            "optimizer.name": "adamw",
            "optimizer.lr": "0.001",
            "seed": "7",
        }
        tags = run.data.tags
        assert tags["forgeml.version"] == forgeml.__version__
        assert tags["forgeml.dataset"] == dataset_version.ref
        assert tags["forgeml.dataset_digest"] == dataset_version.digest
        assert tags["mlflow.user"] == "tester"
        assert tags.get("mlflow.source.git.commit") == git_commit()
    finally:
        finish_run(handle, "FINISHED", {})


def test_the_dataset_version_is_the_runs_mlflow_dataset_input(
    tracking_workspace: Workspace, dataset_version: DatasetVersion
) -> None:
    handle = start_run(tracking_workspace, CONFIG, "toy-mlp", dataset_version)
    finish_run(handle, "FINISHED", {})
    inputs = handle.client.get_run(handle.run_id).inputs
    assert inputs is not None
    (dataset_input,) = inputs.dataset_inputs
    dataset = dataset_input.dataset
    assert dataset.name == dataset_version.ref
    # MLflow caps digests at 36 characters: the forgeml digest's prefix, full one in source
    assert dataset.digest == dataset_version.digest[:36]
    assert json.loads(dataset.source)["digest"] == dataset_version.digest
    assert dataset.source_type == "forgeml"
    assert json.loads(str(dataset.profile))["num_rows"] == dataset_version.rows
    assert [(tag.key, tag.value) for tag in dataset_input.tags] == [
        ("mlflow.data.context", "training")
    ]


def test_the_installed_packages_are_logged_as_environment_json(
    tracking_workspace: Workspace, tmp_path: Path
) -> None:
    import mlflow

    handle = start_run(tracking_workspace, {}, "env-check", None)
    finish_run(handle, "FINISHED", {})
    folder = handle.client.download_artifacts(handle.run_id, "environment.json", str(tmp_path))
    environment = json.loads(Path(folder).read_text(encoding="utf-8"))
    assert environment["packages"]["mlflow"] == mlflow.__version__
    assert environment["python"].count(".") == 2


def test_git_commit_is_the_checked_out_commit_or_none(tmp_path: Path) -> None:
    expected = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if expected.returncode != 0:
        pytest.skip(f"{REPO} is not a git checkout")
    assert git_commit(REPO) == expected.stdout.strip()
    assert git_commit(tmp_path) is None


def test_config_params_are_flat_and_within_mlflow_limits() -> None:
    params = config_params(
        {"data": {"rename": {"a=b": "c", "../up": "x"}}, "note": "n" * 10_000, "on": True}
    )
    assert params["data.rename.a_b"] == "c"
    assert params["data.rename.../up"] == "x"
    assert len(params["note"]) == MAX_PARAM_VALUE_LENGTH
    assert params["note"].endswith("...")
    assert params["on"] == "true"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("train/loss", "train/loss"),
        ("slice sex=Male", "slice sex_Male"),
        ("/a//b/", "a/b"),
        ("a/../b", "a/_/b"),
        ("", "_"),
        ("k" * 300, "k" * 250),
    ],
)
def test_sanitize_key_makes_valid_mlflow_names(key: str, expected: str) -> None:
    assert sanitize_key(key) == expected


@pytest.mark.parametrize("status", ["FINISHED", "FAILED", "KILLED"])
def test_finish_run_records_the_outcome_in_both_stores(
    tracking_workspace: Workspace, dataset_version: DatasetVersion, status: str
) -> None:
    handle = start_run(tracking_workspace, CONFIG, "toy-mlp", dataset_version)
    logger = handle.metric_logger()
    for step in range(3):
        logger.log_metrics({"val/accuracy": 0.5 + step / 10}, step)
    error = None if status == "FINISHED" else "Loss became NaN at step 3."
    metrics = {"val/accuracy": 0.7, "test_accuracy": 0.75, "per_sex": {"Male": {"f1": 0.6}}}
    record = finish_run(handle, RunStatus(status), metrics, error=error)

    assert record.status == status
    assert record.metrics == metrics
    assert record.error == error
    assert record.ended_at is not None
    assert handle.heartbeat is not None
    assert not handle.heartbeat._thread.is_alive()
    run = handle.client.get_run(handle.run_id)
    assert run.info.status == status
    assert run.info.end_time is not None
    # the logged curve is kept; metrics MLflow lacked are added
    history = handle.client.get_metric_history(handle.run_id, "val/accuracy")
    assert [point.step for point in history] == [0, 1, 2]
    assert run.data.metrics["test_accuracy"] == 0.75
    assert run.data.metrics["per_sex.Male.f1"] == 0.6
    assert run.data.tags.get("forgeml.error") == error
    assert audit_actions(tracking_workspace, handle.run_id) == ["run.start", "run.finish"]


def test_finish_run_stores_non_finite_metrics_as_null(tracking_workspace: Workspace) -> None:
    handle = start_run(tracking_workspace, {}, "nan-run", None)
    record = finish_run(handle, "FAILED", {"loss": float("nan")}, error="Loss became NaN.")
    assert get_run(tracking_workspace, record.id).metrics == {"loss": None}


def test_finish_run_rejects_an_unknown_status(tracking_workspace: Workspace) -> None:
    handle = start_run(tracking_workspace, {}, "bad-status", None)
    with pytest.raises(UsageError) as caught:
        finish_run(handle, "DONE", {})
    assert_one_sentence(str(caught.value))
    assert "FINISHED, FAILED, KILLED" in str(caught.value)
    finish_run(handle, "FINISHED", {})


def test_get_run_by_id_prefix_and_name(tracking_workspace: Workspace) -> None:
    first = start_run(tracking_workspace, {}, "lookup", None)
    finish_run(first, "FINISHED", {})
    second = start_run(tracking_workspace, {}, "lookup", None)
    finish_run(second, "FINISHED", {})
    assert get_run(tracking_workspace, first.run_id).id == first.run_id
    assert get_run(tracking_workspace, first.run_id[:12]).id == first.run_id
    assert get_run(tracking_workspace, "lookup").id == second.run_id


@pytest.mark.parametrize("ref", ["no-such-run", "0000dead"])
def test_get_run_of_an_unknown_run_fails_clearly(tracking_workspace: Workspace, ref: str) -> None:
    with pytest.raises(NotFoundError) as caught:
        get_run(tracking_workspace, ref)
    assert_one_sentence(str(caught.value))
    assert f"Run '{ref}' does not exist" in str(caught.value)


def test_hpo_trials_are_child_runs(tracking_workspace: Workspace) -> None:
    study = start_run(tracking_workspace, {}, "study", None)
    trials = [
        start_run(tracking_workspace, {"trial": i}, "study-trial", None, parent_run_id=study.run_id)
        for i in range(2)
    ]
    for trial in trials:
        finish_run(trial, "FINISHED", {"loss": 1.0})
    listed = list_runs(tracking_workspace, parent_run_id=study.run_id)
    assert [run.id for run in listed] == [trial.run_id for trial in reversed(trials)]
    tags = study.client.get_run(trials[0].run_id).data.tags
    assert tags["mlflow.parentRunId"] == study.run_id
    assert list_runs(tracking_workspace, status="RUNNING", name="study")[0].id == study.run_id
    finish_run(study, "FINISHED", {})
    assert list_runs(tracking_workspace, status="RUNNING", name="study") == []
    assert len(list_runs(tracking_workspace, limit=1)) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"name": "../escape"}, InvalidNameError, "Invalid run name"),
        ({"experiment": "a/b"}, InvalidNameError, "Invalid experiment name"),
        ({"lease_seconds": 0}, UsageError, "at least 1 second"),
        ({"parent_run_id": "ffff0000"}, NotFoundError, "does not exist"),
    ],
)
def test_start_run_refuses_bad_arguments_and_records_nothing(
    tracking_workspace: Workspace, kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    before = len(list_runs(tracking_workspace))
    arguments: dict[str, Any] = {"name": "refused", "dataset_version": None, **kwargs}
    with pytest.raises(error) as caught:
        start_run(tracking_workspace, {}, **arguments)
    assert_one_sentence(str(caught.value))
    assert fragment in str(caught.value)
    assert len(list_runs(tracking_workspace)) == before


def test_a_failed_forgeml_write_leaves_no_live_mlflow_run(tracking_workspace: Workspace) -> None:
    from sqlalchemy.exc import IntegrityError as SAIntegrityError

    # a version object that is not in the store: the runs row breaks its foreign key
    ghost = DatasetVersion(id="0" * 32, version=1, digest="ab" * 32, rows=1, size_bytes=1)
    ghost.dataset = Dataset(name="ghost")
    before = {run.id for run in list_runs(tracking_workspace)}
    with pytest.raises(SAIntegrityError):
        start_run(tracking_workspace, {}, "ghost-run", ghost)
    assert {run.id for run in list_runs(tracking_workspace)} == before
    client = open_client(tracking_workspace)
    experiment = client.get_experiment_by_name("ghost-run")
    assert experiment is not None
    live = client.search_runs([experiment.experiment_id])
    assert live == []


def test_resume_run_takes_over_a_stopped_run(tracking_workspace: Workspace) -> None:
    handle = start_run(tracking_workspace, {}, "resumable", None)
    finish_run(handle, "KILLED", {}, error="Killed by the user.")
    resumed = resume_run(tracking_workspace, handle.run_id)
    try:
        record = get_run(tracking_workspace, handle.run_id)
        assert (record.status, record.error, record.ended_at) == ("RUNNING", None, None)
        assert resumed.client.get_run(handle.run_id).info.status == "RUNNING"
        with pytest.raises(UsageError) as running:
            resume_run(tracking_workspace, handle.run_id)
        assert_one_sentence(str(running.value))
        assert "still running" in str(running.value)
    finally:
        finish_run(resumed, "FINISHED", {"loss": 0.1})
    with pytest.raises(UsageError) as finished:
        resume_run(tracking_workspace, handle.run_id)
    assert_one_sentence(str(finished.value))
    assert "already FINISHED" in str(finished.value)
    actions = audit_actions(tracking_workspace, handle.run_id)
    assert actions == ["run.start", "run.finish", "run.resume", "run.finish"]


def test_attach_run_does_not_take_the_run_over(tracking_workspace: Workspace) -> None:
    handle = start_run(tracking_workspace, {}, "attached", None)
    finish_run(handle, "FINISHED", {})
    attached = attach_run(tracking_workspace, handle.run_id)
    assert attached.heartbeat is None
    assert attached.experiment_id == handle.experiment_id
    assert get_run(tracking_workspace, handle.run_id).status == "FINISHED"


def test_an_unreachable_tracking_server_is_one_clear_error(
    tracking_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # port 9 (discard) has no listener here: the connection is refused at once
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://forgeml:secret@127.0.0.1:9")
    before = len(list_runs(tracking_workspace))
    with pytest.raises(TrackingUnavailableError) as caught:
        start_run(tracking_workspace, {}, "offline", None)
    message = str(caught.value)
    assert_one_sentence(message)
    assert "Cannot reach the MLflow tracking server at http://forgeml:***@127.0.0.1:9" in message
    assert "secret" not in message
    assert len(list_runs(tracking_workspace)) == before


def test_an_unusable_embedded_store_is_one_clear_error(
    tracking_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////proc/forgeml/mlflow.db")
    with pytest.raises(TrackingUnavailableError) as caught:
        start_run(tracking_workspace, {}, "nowhere", None)
    assert_one_sentence(str(caught.value))
    assert "Cannot create the MLflow database folder /proc/forgeml" in str(caught.value)


def test_records_are_usable_after_their_session(tracking_workspace: Workspace) -> None:
    handle = start_run(tracking_workspace, {}, "detached", None)
    record = finish_run(handle, "FINISHED", {})
    assert isinstance(record, RunRecord)
    assert get_run(tracking_workspace, record.id).dataset_version is None


def test_the_environment_names_every_installed_distribution_at_its_version() -> None:
    expected = {
        dist.metadata["Name"]: dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"]
    }
    assert environment()["packages"] == dict(sorted(expected.items(), key=lambda i: i[0].lower()))
