"""The scheduler's Prometheus metrics: read from the store at each scrape."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from forgeml.core import nvml
from forgeml.core.store import JobAttemptRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler.executors.local import LocalExecutor
from forgeml.scheduler.jobs import find_job
from forgeml.scheduler.metrics import scheduler_registry
from forgeml.scheduler.policy import PolicyOptions
from forgeml.scheduler.queues import create_queue, parse_queue
from forgeml.scheduler.service import Scheduler
from forgeml.serve._supervisor import free_port
from tests._wait import Gate, wait_until
from tests.scheduler.conftest import python_job, run_to_end, state_of, submit_local, wait_for

FORGEML = str(Path(sys.executable).with_name("forgeml"))


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("FORGEML_DB_URL", "FORGEML_ARTIFACTS_URL")
    }
    return env | {"FORGEML_HOME": str(tmp_path / "home"), "FORGEML_USER": "tester"}


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def test_pending_jobs_are_counted_and_their_wait_measured(sched_workspace: Workspace) -> None:
    first = submit_local(sched_workspace, python_job("pass"))
    submit_local(sched_workspace, python_job("pass"))
    submitted = find_job(sched_workspace, first).submitted_at
    later = _aware(submitted) + timedelta(seconds=90)
    registry = scheduler_registry(sched_workspace.store, lambda: later)
    pending = {"queue": "default", "state": "PENDING"}
    assert registry.get_sample_value("forgeml_scheduler_jobs", pending) == 2
    wait = registry.get_sample_value(
        "forgeml_scheduler_oldest_pending_seconds", {"queue": "default"}
    )
    assert wait == pytest.approx(90, abs=0.01)


def _local_scheduler(workspace: Workspace) -> Scheduler:
    return Scheduler(workspace, LocalExecutor(cpus=[0, 1], gpus=0), policy_options=PolicyOptions())


def _running_job(workspace: Workspace, scheduler: Scheduler, gate: Gate) -> str:
    """A job that runs until `gate` lets it through, once the scheduler has started it."""
    job_id = submit_local(workspace, python_job(gate.wait_code))
    wait_for(lambda: state_of(workspace, job_id) == "RUNNING", step=scheduler.cycle)
    return job_id


def test_a_running_job_has_its_own_series_until_it_ends(
    sched_workspace: Workspace, gate: Gate
) -> None:
    scheduler = _local_scheduler(sched_workspace)
    job_id = _running_job(sched_workspace, scheduler, gate)
    registry = scheduler_registry(sched_workspace.store)
    labels = {"job": job_id, "queue": "default", "kind": "command"}
    assert registry.get_sample_value("forgeml_job_cpu_seconds_total", labels) is not None
    assert registry.get_sample_value("forgeml_job_peak_memory_bytes", labels) is not None
    running = {"queue": "default", "state": "RUNNING"}
    assert registry.get_sample_value("forgeml_scheduler_jobs", running) == 1
    # nothing pends: no wait series at all (absent, not zero)
    assert (
        registry.get_sample_value("forgeml_scheduler_oldest_pending_seconds", {"queue": "default"})
        is None
    )
    gate.release()
    assert run_to_end(scheduler, job_id) == "SUCCEEDED"
    assert registry.get_sample_value("forgeml_job_cpu_seconds_total", labels) is None
    done = {"queue": "default", "state": "SUCCEEDED"}
    assert registry.get_sample_value("forgeml_scheduler_jobs", done) == 1
    assert registry.get_sample_value("forgeml_queue_cost_total", {"queue": "default"}) is not None


def test_a_running_jobs_gpu_seconds_are_exported_only_where_gpus_are_metered(
    sched_workspace: Workspace, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(nvml._nvml_state, "module", None)
    scheduler = _local_scheduler(sched_workspace)
    job_id = _running_job(sched_workspace, scheduler, gate)
    registry = scheduler_registry(sched_workspace.store)
    labels = {"job": job_id, "queue": "default", "kind": "command"}
    # no NVML and no GPU second recorded: absent, not an idle 0
    assert registry.get_sample_value("forgeml_job_gpu_seconds_total", labels) is None
    with sched_workspace.store.session() as session:
        [attempt] = session.scalars(
            select(JobAttemptRecord).where(JobAttemptRecord.job_id == job_id)
        ).all()
        attempt.gpu_seconds = 12.5  # what the usage meter stores at a heartbeat
        session.commit()
    assert registry.get_sample_value("forgeml_job_gpu_seconds_total", labels) == 12.5
    gate.release()
    assert run_to_end(scheduler, job_id) == "SUCCEEDED"
    # NVML with no GPU this job holds: its GPU seconds are a measured 0
    no_gpus = SimpleNamespace(NVMLError=RuntimeError, nvmlDeviceGetCount=lambda: 0)
    monkeypatch.setitem(nvml._nvml_state, "module", no_gpus)
    idle = _running_job(sched_workspace, scheduler, gate)
    idle_labels = labels | {"job": idle}
    assert registry.get_sample_value("forgeml_job_gpu_seconds_total", idle_labels) == 0.0
    gate.release()
    assert run_to_end(scheduler, idle) == "SUCCEEDED"
    assert registry.get_sample_value("forgeml_job_gpu_seconds_total", idle_labels) is None


def test_a_running_jobs_nvml_figures_are_exported_as_its_cost_record_keeps_them(
    sched_workspace: Workspace, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(nvml._nvml_state, "module", None)
    scheduler = _local_scheduler(sched_workspace)
    job_id = _running_job(sched_workspace, scheduler, gate)
    registry = scheduler_registry(sched_workspace.store)
    labels = {"job": job_id, "queue": "default", "kind": "command"}
    names = (
        "forgeml_job_gpu_utilization_ratio",
        "forgeml_job_gpu_peak_memory_bytes",
        "forgeml_job_gpu_energy_joules_total",
    )
    # the attempt held no GPU: no figure, not zeros
    assert [registry.get_sample_value(name, labels) for name in names] == [None, None, None]
    with sched_workspace.store.session() as session:
        [attempt] = session.scalars(
            select(JobAttemptRecord).where(JobAttemptRecord.job_id == job_id)
        ).all()
        # what the usage meter stores at a heartbeat of a job on a GPU
        attempt.gpu_utilization = 0.83
        attempt.gpu_peak_memory_bytes = 12 * 2**30
        attempt.gpu_energy_joules = 5400.0
        session.commit()
    assert [registry.get_sample_value(name, labels) for name in names] == [
        0.83,
        12 * 2**30,
        5400.0,
    ]
    gate.release()
    assert run_to_end(scheduler, job_id) == "SUCCEEDED"
    assert registry.get_sample_value("forgeml_job_gpu_energy_joules_total", labels) is None


def test_a_budget_is_exported_beside_the_spend(sched_workspace: Workspace) -> None:
    create_queue(sched_workspace, parse_queue({"name": "research", "budget": 12.5}))
    registry = scheduler_registry(sched_workspace.store)
    assert registry.get_sample_value("forgeml_queue_budget", {"queue": "research"}) == 12.5
    assert registry.get_sample_value("forgeml_queue_budget", {"queue": "default"}) is None


def test_gpus_are_absent_without_nvml_and_reported_with_it(
    sched_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(nvml._nvml_state, "module", None)
    registry = scheduler_registry(sched_workspace.store)
    names = {sample.name for family in registry.collect() for sample in family.samples}
    assert "forgeml_gpu_utilization_ratio" not in names
    assert "forgeml_gpu_power_watts" not in names

    def power(handle: int) -> int:
        if handle == 1:
            raise RuntimeError("NOT_SUPPORTED")  # a board that does not report its draw
        return 412_500  # milliwatts

    fake = SimpleNamespace(
        NVMLError=RuntimeError,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetUtilizationRates=lambda handle: SimpleNamespace(gpu=[37, 0][handle]),
        nvmlDeviceGetMemoryInfo=lambda handle: SimpleNamespace(used=2**30, total=2**34),
        nvmlDeviceGetPowerUsage=power,
    )
    monkeypatch.setitem(nvml._nvml_state, "module", fake)
    assert registry.get_sample_value("forgeml_gpu_utilization_ratio", {"gpu": "0"}) == 0.37
    assert registry.get_sample_value("forgeml_gpu_utilization_ratio", {"gpu": "1"}) == 0.0
    assert registry.get_sample_value("forgeml_gpu_power_watts", {"gpu": "0"}) == 412.5
    assert registry.get_sample_value("forgeml_gpu_power_watts", {"gpu": "1"}) is None


@pytest.mark.slow
def test_forgeml_server_serves_the_metrics(tmp_path: Path) -> None:
    env = _env(tmp_path)
    submitted = subprocess.run(
        [FORGEML, "jobs", "submit", "--detach", "--json", "--", "true"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    port = free_port()
    with (tmp_path / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [FORGEML, "server", "--interval", "0.2", "--metrics-port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def succeeded() -> bool:
            try:
                text = httpx.get(url, timeout=2).text
            except httpx.HTTPError:
                return False
            return any(
                sample.name == "forgeml_scheduler_jobs"
                and sample.labels["state"] == "SUCCEEDED"
                and sample.value == 1
                for family in text_string_to_metric_families(text)
                for sample in family.samples
            )

        wait_until(succeeded, 60, "the server's metrics counting the finished job", 0.2)
    finally:
        server.terminate()
        server.wait(30)
    assert server.returncode == 0
    assert f"metrics on http://127.0.0.1:{port}/metrics" in (tmp_path / "server.log").read_text()


def test_a_taken_metrics_port_is_one_sentence(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [FORGEML, "server", "--metrics-port", str(port)],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"Cannot serve metrics on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr
