"""The training metrics: read from the tracking store at each scrape, for running runs only;
exported by a real `forgeml server --metrics-port` while a real training job runs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.scheduler.cluster import local_cluster
from forgeml.scheduler.jobs import find_job, submit
from forgeml.scheduler.model import JobSpec, JobState
from forgeml.serve._supervisor import free_port
from forgeml.tracking import RunHandle, finish_run, get_run, resume_run, start_run
from forgeml.tracking.metrics import TrainingCollector
from forgeml.tracking.runs import JOB_TAG
from tests._wait import wait_until
from tests.train.conftest import (
    ADULT_CONFIG,
    copy_adult_home,
    forgeml_command,
    quick,
    subprocess_env,
)

LOSS = "forgeml_training_loss"


@pytest.fixture
def registry(tracking_workspace: Workspace) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(TrainingCollector(tracking_workspace))
    return registry


@pytest.fixture
def running(tracking_workspace: Workspace) -> Iterator[RunHandle]:
    """A RUNNING run planned for 40 steps, that has logged two windows and an evaluation."""
    handle = start_run(tracking_workspace, {"max_steps": 40}, "adult-mlp", None)
    logger = handle.metric_logger()
    logger.log_metrics({"train_loss": 0.9, "lr": 0.02, "samples_per_s": 400.0, "epoch": 0.5}, 10)
    logger.log_metrics({"train_loss": 0.7, "lr": 0.01, "samples_per_s": 500.0, "epoch": 1.0}, 20)
    logger.log_metrics({"eval_accuracy": 0.8, "eval_loss": 0.6}, 20)
    logger.close()  # sends what it holds
    yield handle
    if get_run(tracking_workspace, handle.run_id).status == "RUNNING":
        finish_run(handle, "FINISHED", {})


def _labels(handle: RunHandle, job: str = "") -> dict[str, str]:
    return {"job": job, "run": handle.run_id, "model": "adult-mlp"}


def _samples(registry: CollectorRegistry, run_id: str) -> dict[str, float]:
    return {
        sample.name + (f"[{sample.labels['metric']}]" if "metric" in sample.labels else ""): (
            sample.value
        )
        for family in registry.collect()
        for sample in family.samples
        if sample.labels.get("run") == run_id
    }


def test_a_running_run_exports_its_latest_metrics(
    registry: CollectorRegistry, running: RunHandle
) -> None:
    assert _samples(registry, running.run_id) == {
        LOSS: 0.7,
        "forgeml_training_samples_per_second": 500.0,
        "forgeml_training_learning_rate": 0.01,
        "forgeml_training_steps_total": 20.0,
        "forgeml_training_progress_ratio": 0.5,
        "forgeml_training_validation_metric[accuracy]": 0.8,
        "forgeml_training_validation_metric[loss]": 0.6,
    }
    assert registry.get_sample_value(LOSS, _labels(running)) == 0.7


def test_a_run_that_ends_drops_out(registry: CollectorRegistry, running: RunHandle) -> None:
    assert registry.get_sample_value(LOSS, _labels(running)) == 0.7
    finish_run(running, "FINISHED", {"accuracy": 0.8})
    assert _samples(registry, running.run_id) == {}


def test_a_run_whose_lease_expired_drops_out(
    tracking_workspace: Workspace, running: RunHandle
) -> None:
    later = datetime.now(UTC) + timedelta(seconds=running.lease_seconds + 60)
    registry = CollectorRegistry()
    registry.register(TrainingCollector(tracking_workspace, clock=lambda: later))
    assert _samples(registry, running.run_id) == {}


def test_progress_of_an_epoch_plan_is_the_logged_epoch_over_the_epochs(
    tracking_workspace: Workspace, registry: CollectorRegistry
) -> None:
    handle = start_run(tracking_workspace, {"epochs": 4}, "adult-mlp", None)
    logger = handle.metric_logger()
    logger.log_metrics({"train_loss": 0.5, "epoch": 1.5}, 30)
    logger.close()
    try:
        progress = registry.get_sample_value("forgeml_training_progress_ratio", _labels(handle))
        assert progress == 1.5 / 4
    finally:
        finish_run(handle, "FINISHED", {})


@pytest.mark.parametrize(("kind", "exported"), [("finetune", True), ("optimize", False)])
def test_a_run_carries_its_job_and_only_training_jobs_are_exported(
    tracking_workspace: Workspace,
    registry: CollectorRegistry,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    exported: bool,
) -> None:
    spec = JobSpec(name="j", owner="tester", kind=kind, command=["true"])  # type: ignore[arg-type]
    job = submit(tracking_workspace, spec, nodes=local_cluster(tracking_workspace.settings))
    monkeypatch.setenv("FORGEML_JOB_ID", job.id)
    handle = start_run(tracking_workspace, {"max_steps": 10}, "adult-mlp", None)
    handle.metric_logger().log_metrics({"train_loss": 0.3}, 5)
    handle.close_loggers()
    try:
        assert handle.client.get_run(handle.run_id).data.tags[JOB_TAG] == job.id
        value = registry.get_sample_value(LOSS, _labels(handle, job.id))
        assert value == (0.3 if exported else None)
    finally:
        finish_run(handle, "FINISHED", {})


def test_a_resumed_run_carries_the_job_that_resumed_it(
    tracking_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGEML_JOB_ID", "first-job")
    handle = start_run(tracking_workspace, {"max_steps": 10}, "adult-mlp", None)
    finish_run(handle, "KILLED", {}, error="preempted")
    monkeypatch.setenv("FORGEML_JOB_ID", "second-job")
    resumed = resume_run(tracking_workspace, handle.run_id)
    try:
        assert resumed.client.get_run(resumed.run_id).data.tags[JOB_TAG] == "second-job"
    finally:
        finish_run(resumed, "FINISHED", {})


def test_an_unreachable_tracking_server_leaves_training_out_of_the_scrape(
    tracking_workspace: Workspace,
    registry: CollectorRegistry,
    running: RunHandle,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    assert _samples(registry, running.run_id) == {}
    assert "Training metrics left out of this scrape" in caplog.text


def test_nothing_is_exported_when_nothing_trains(tracking_workspace: Workspace) -> None:
    registry = CollectorRegistry()
    registry.register(TrainingCollector(tracking_workspace))
    families = {family.name: family.samples for family in registry.collect()}
    assert LOSS in families and families[LOSS] == []


# ---- through a real scheduler job and a real server


def _scrape(url: str) -> list[Any] | None:
    """The samples `url` serves now, or None when it does not answer (yet)."""
    try:
        text = httpx.get(url, timeout=30).text
    except httpx.HTTPError:
        return None
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _training_once(
    url: str, job: str, holds: Callable[[dict[str, float]], bool], what: str
) -> dict[str, float]:
    """The job's training series at the first scrape where `holds` is true of them."""
    found: dict[str, float] = {}

    def scraped() -> bool:
        samples = _scrape(url)
        if samples is None:
            return False
        found.clear()
        found.update(
            (sample.name, sample.value)
            for sample in samples
            if sample.name.startswith("forgeml_training_") and sample.labels.get("job") == job
        )
        return holds(found)

    wait_until(scraped, 180, f"the job's series showing {what}", 0.5)
    return found


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        forgeml_command(*args), env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cancel(env: dict[str, str], home: Path, job: str) -> None:
    """Stop the job and wait until it ended: a million-step job is never left behind."""
    subprocess.run(forgeml_command("jobs", "cancel", job), env=env, check=False, timeout=120)
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        ended = lambda: JobState(find_job(workspace, job).state).is_final  # noqa: E731
        wait_until(ended, 120, "the cancelled job to end", 0.5)
    finally:
        workspace.close()


@pytest.mark.slow
def test_forgeml_server_exports_a_training_job_while_it_runs(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    home = copy_adult_home(tmp_path_factory, tmp_path / "home")
    env = subprocess_env(home)
    # long enough to be scraped while it runs; the test cancels it
    overrides = quick(
        "max_steps=1000000", "early_stopping=null", "log_every_steps=5", "data.max_rows=2048"
    )
    queued = _cli(env, "train", str(ADULT_CONFIG), *overrides, "--detach", "--json")
    job = json.loads(queued)["job_id"]
    port = free_port()
    with (tmp_path / "server.log").open("wb") as log:
        server = subprocess.Popen(
            forgeml_command("server", "--interval", "0.2", "--metrics-port", str(port)),
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    steps = "forgeml_training_steps_total"
    try:
        try:
            first = _training_once(url, job, lambda series: steps in series, "its metrics")
            assert {
                "forgeml_training_loss",
                "forgeml_training_samples_per_second",
                "forgeml_training_learning_rate",
                "forgeml_training_progress_ratio",
                steps,
            } <= set(first)
            assert 0 < first["forgeml_training_progress_ratio"] < 1
            assert first["forgeml_training_samples_per_second"] > 0
            later = lambda series: series.get(steps, 0) > first[steps]  # noqa: E731
            _training_once(url, job, later, "more steps done")
        finally:
            _cancel(env, home, job)
        # the run ended KILLED (stopped with a checkpoint): its series are gone
        _training_once(url, job, lambda series: not series, "the stopped run dropping out")
        assert any(sample.name == "forgeml_scheduler_jobs" for sample in _scrape(url) or [])
    finally:
        server.terminate()
        server.wait(60)
    assert server.returncode == 0, (tmp_path / "server.log").read_text()
