"""Each deployment's GPU use: its replicas' processes found from the store, matched with
what NVML reports (an object of NVML's shape here: the machines the tests run on have no
GPU), and no series at all without NVML."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select

from forgeml.core import nvml
from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.gpus import (
    WINDOW_S,
    DeploymentGpuCollector,
    DeploymentGpuUse,
    deployment_gpu_use,
    replica_owners,
)
from tests.gateway.conftest import add_deployment

NOW = 1_800_000_000.0  # the collector's wall clock, seconds
NOW_US = int(NOW * 1e6)
SINCE_US = int((NOW - WINDOW_S) * 1e6)
NOT_SUPPORTED, NOT_FOUND = 3, 6
GIB = 1024**3


class _NvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def _process(pid: int, memory: int | None) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, usedGpuMemory=memory)


def _sample(pid: int, seconds_ago: float, percent: int) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, timeStamp=NOW_US - int(seconds_ago * 1e6), smUtil=percent)


def fake_nvml(*gpus: dict[str, Any]) -> SimpleNamespace:
    """NVML's functions over `gpus`: each a dict of `compute` and `graphics` process lists,
    `samples` (a list, or the NVML error code the call raises) and `milliwatts` (absent:
    the board reports no draw)."""

    def power(handle: int) -> int:
        if "milliwatts" not in gpus[handle]:
            raise _NvmlError(NOT_SUPPORTED)
        return int(gpus[handle]["milliwatts"])

    def utilization(handle: int, since_us: int) -> list[SimpleNamespace]:
        samples = gpus[handle]["samples"]
        if isinstance(samples, int):
            raise _NvmlError(samples)
        return [sample for sample in samples if sample.timeStamp > since_us]

    return SimpleNamespace(
        NVMLError=_NvmlError,
        NVML_SUCCESS=0,
        NVML_ERROR_NOT_FOUND=NOT_FOUND,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: gpus[handle]["compute"],
        nvmlDeviceGetGraphicsRunningProcesses=lambda handle: gpus[handle].get("graphics", []),
        nvmlDeviceGetProcessUtilization=utilization,
        nvmlDeviceGetPowerUsage=power,
    )


@pytest.fixture
def replica() -> Iterator[tuple[int, int]]:
    """A real replica-like process and the child it started: (its pid, the child's pid).
    Both run until the test closes their standard input."""
    child = "import sys; sys.stdin.read()"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; c = subprocess.Popen([sys.executable, "
         f"'-c', {child!r}]); print(c.pid, flush=True); c.wait()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None and parent.stdin is not None
    try:
        yield parent.pid, int(parent.stdout.readline())
    finally:
        parent.stdin.close()
        parent.wait(30)
        parent.stdout.close()


def _record_pids(workspace: Workspace, name: str, pids: list[int | None]) -> None:
    add_deployment(workspace, name, [f"http://127.0.0.1:{9000 + i}" for i in range(len(pids))])
    with workspace.store.session() as session:
        rows = session.scalars(
            select(DeploymentReplicaRecord)
            .join(DeploymentRecord, DeploymentRecord.id == DeploymentReplicaRecord.deployment_id)
            .where(DeploymentRecord.name == name)
            .order_by(DeploymentReplicaRecord.port)
        ).all()
        for row, pid in zip(rows, pids, strict=True):
            row.pid = pid


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    return {
        (sample.name, sample.labels["deployment"], sample.labels["gpu"]): sample.value
        for family in registry.collect()
        for sample in family.samples
    }


def test_a_replicas_processes_and_their_children_are_its_deployments(
    workspace: Workspace, replica: tuple[int, int]
) -> None:
    parent, child = replica
    _record_pids(workspace, "adult", [parent, None])  # a replica still starting has no pid
    assert replica_owners(workspace) == {parent: "adult", child: "adult"}


def test_the_collector_maps_nvml_processes_to_deployments(
    workspace: Workspace, replica: tuple[int, int]
) -> None:
    parent, child = replica
    _record_pids(workspace, "adult", [parent])
    nvml = fake_nvml(
        # the replica's child computes on GPU 0 beside a process that is no replica's
        {"compute": [_process(child, 2 * GIB), _process(1, 5 * GIB)],
         "samples": [_sample(child, 1, 30), _sample(child, 2, 50), _sample(1, 1, 90)]},
        {"compute": [_process(4_000_000, GIB)], "samples": []},
    )  # fmt: skip
    registry = CollectorRegistry()
    registry.register(DeploymentGpuCollector(workspace, nvml=lambda: nvml, clock=lambda: NOW))
    assert _samples(registry) == {
        ("forgeml_deployment_gpu_memory_bytes", "adult", "0"): 2 * GIB,
        ("forgeml_deployment_gpu_utilization_ratio", "adult", "0"): 0.4,
    }


def test_use_is_summed_per_deployment_and_gpu() -> None:
    owners = {10: "adult", 11: "adult", 20: "sst2"}
    nvml = fake_nvml(
        # 11 is in both lists (its memory counts once), 10's memory is unknown (WDDM)
        {"compute": [_process(10, None), _process(11, GIB), _process(20, 3 * GIB)],
         "graphics": [_process(11, GIB)],
         "samples": [_sample(10, 1, 20), _sample(11, 1, 30), _sample(20, 1, 70),
                     _sample(20, WINDOW_S + 5, 10)]},  # older than the window
        # each process's samples in the window are averaged
        {"compute": [_process(10, GIB)], "samples": [_sample(10, 1, 50), _sample(10, 2, 70)]},
    )  # fmt: skip
    assert deployment_gpu_use(nvml, owners, SINCE_US) == [
        DeploymentGpuUse("adult", 0, GIB, 0.5),
        DeploymentGpuUse("sst2", 0, 3 * GIB, 0.7),
        DeploymentGpuUse("adult", 1, GIB, 0.6),
    ]


def test_power_is_a_deployments_only_on_a_gpu_it_holds_alone() -> None:
    owners = {10: "adult", 20: "sst2"}
    nvml = fake_nvml(
        {"compute": [_process(10, GIB)], "samples": [], "milliwatts": 310_500},  # adult alone
        {"compute": [_process(10, GIB), _process(20, GIB)], "samples": [],
         "milliwatts": 500_000},  # shared: whose draw is it?
        {"compute": [_process(20, GIB), _process(99, GIB)], "samples": [],
         "milliwatts": 200_000},  # beside a process that is no deployment's
        {"compute": [_process(20, GIB)], "samples": []},  # a board that reports no draw
    )  # fmt: skip

    uses = deployment_gpu_use(nvml, owners, SINCE_US)

    assert [(use.deployment, use.gpu, use.power_watts) for use in uses] == [
        ("adult", 0, 310.5),
        ("adult", 1, None),
        ("sst2", 1, None),
        ("sst2", 2, None),
        ("sst2", 3, None),
    ]


@pytest.mark.parametrize(
    ("samples", "utilization"),
    [
        (NOT_FOUND, 0.0),
        (0, 0.0),
        (NOT_SUPPORTED, None),
        ([_sample(10, 1, 60), _sample(11, 1, 60)], 1.0),  # at most the whole GPU
    ],
    ids=["no-samples-lately", "empty-first-call", "not-kept-by-this-gpu", "capped-at-one"],
)
def test_utilization_without_samples_is_zero_and_without_support_absent(
    samples: Any, utilization: float | None
) -> None:
    nvml = fake_nvml({"compute": [_process(10, GIB), _process(11, GIB)], "samples": samples})
    assert deployment_gpu_use(nvml, {10: "adult", 11: "adult"}, SINCE_US) == [
        DeploymentGpuUse("adult", 0, 2 * GIB, utilization)
    ]


def test_a_gpu_nvml_cannot_read_is_left_out() -> None:
    nvml = fake_nvml({"compute": NOT_SUPPORTED, "samples": []})

    def failing(handle: int) -> list[Any]:
        raise _NvmlError(NOT_SUPPORTED)

    nvml.nvmlDeviceGetComputeRunningProcesses = failing
    assert deployment_gpu_use(nvml, {10: "adult"}, SINCE_US) == []


def test_without_nvml_there_are_no_series(workspace: Workspace, replica: tuple[int, int]) -> None:
    _record_pids(workspace, "adult", [replica[0]])
    registry = CollectorRegistry()
    registry.register(DeploymentGpuCollector(workspace, nvml=lambda: None))
    families = {family.name: family.samples for family in registry.collect()}
    assert families == {
        "forgeml_deployment_gpu_utilization_ratio": [],
        "forgeml_deployment_gpu_memory_bytes": [],
        "forgeml_deployment_gpu_power_watts": [],
    }


def test_this_machines_nvml_gives_no_series_when_it_finds_no_gpu(
    workspace: Workspace, replica: tuple[int, int]
) -> None:
    if nvml.nvml_module() is not None:
        pytest.skip("this machine has an NVML driver; the absent path needs one without")
    _record_pids(workspace, "adult", [replica[0]])
    registry = CollectorRegistry()
    registry.register(DeploymentGpuCollector(workspace))  # the real pynvml, initialised once
    assert _samples(registry) == {}
