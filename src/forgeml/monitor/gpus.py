"""GPU use of each deployment's model servers, read from NVML at each scrape.

`forgeml server --metrics-port PORT` serves it. A deployment's processes are its replicas'
recorded pids and their descendants; NVML lists the processes holding a context on each
GPU, with the memory they use (`nvmlDeviceGetComputeRunningProcesses`, the graphics list
too) and samples of how busy each kept the GPU (`nvmlDeviceGetProcessUtilization`).

| metric | type | labels |
|---|---|---|
| `forgeml_deployment_gpu_utilization_ratio` | gauge (0-1 SM share, lately) | deployment, gpu |
| `forgeml_deployment_gpu_memory_bytes` | gauge (GPU memory held) | deployment, gpu |
| `forgeml_deployment_gpu_power_watts` | gauge (draw of a GPU it holds alone) | deployment, gpu |

A deployment has series only on the GPUs where one of its processes holds a context, and
none at all without NVML (the `gpu` extra and a driver) or a GPU: absent, not zero. A GPU
that keeps no per-process samples (MIG instances, some consumer boards) has memory series
and no utilisation. NVML reads power per GPU, not per process: a deployment has a power
series on a GPU only while its processes are the GPU's only holders (the draw is then its
own), and none where the board reports no draw. Inside a container whose PID namespace
differs from the driver's, NVML reports host pids that match no replica, and nothing is
exported (as for jobs' GPU time).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import psutil
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from forgeml.core.nvml import nvml_module
from forgeml.core.workspace import Workspace
from forgeml.serve.deployments import list_deployments

# how far back utilisation samples count: a few of NVML's sample periods, well under a
# scrape interval, so the value says how busy the deployment is now
WINDOW_S = 10.0


def _families() -> dict[str, GaugeMetricFamily]:
    return {
        "busy": GaugeMetricFamily(
            "forgeml_deployment_gpu_utilization_ratio",
            "Share (0-1) of a GPU's streaming multiprocessors a deployment's processes kept "
            "busy lately (NVML); absent without GPUs.",
            labels=["deployment", "gpu"],
        ),
        "memory": GaugeMetricFamily(
            "forgeml_deployment_gpu_memory_bytes",
            "GPU memory a deployment's processes hold (NVML); absent without GPUs.",
            labels=["deployment", "gpu"],
        ),
        "power": GaugeMetricFamily(
            "forgeml_deployment_gpu_power_watts",
            "Power draw of a GPU that serves only this deployment (NVML); absent without "
            "GPUs, on a shared GPU, or where the board reports none.",
            labels=["deployment", "gpu"],
        ),
    }


@dataclass(frozen=True)
class DeploymentGpuUse:
    """What one deployment's processes use of one GPU."""

    deployment: str
    gpu: int
    memory_bytes: int
    utilization: float | None  # None: the GPU keeps no per-process samples
    power_watts: float | None = None  # the GPU's draw, set only where it is all this one's


class DeploymentGpuCollector(Collector):
    """Each deployment's GPU use, measured through NVML at each scrape.

    Args:
        workspace: whose deployments are measured.
        nvml: returns the initialised NVML module (`pynvml`), or None without one.
        clock: wall-clock seconds (NVML stamps its samples in microseconds of it).
    """

    def __init__(
        self,
        workspace: Workspace,
        nvml: Callable[[], Any] = nvml_module,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._workspace = workspace
        self._nvml = nvml
        self._clock = clock

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        nvml = self._nvml()
        owners = replica_owners(self._workspace) if nvml is not None else {}
        if owners:
            since_us = int((self._clock() - WINDOW_S) * 1e6)
            for use in deployment_gpu_use(nvml, owners, since_us):
                labels = [use.deployment, str(use.gpu)]
                families["memory"].add_metric(labels, float(use.memory_bytes))
                if use.utilization is not None:
                    families["busy"].add_metric(labels, use.utilization)
                if use.power_watts is not None:
                    families["power"].add_metric(labels, use.power_watts)
        yield from families.values()


def replica_owners(workspace: Workspace) -> dict[int, str]:
    """The deployment of each live replica process and of every process it started."""
    owners: dict[int, str] = {}
    for deployment in list_deployments(workspace):
        for replica in deployment.replicas:
            if replica.pid is None:
                continue
            try:
                tree = [replica.pid, *(c.pid for c in psutil.Process(replica.pid).children(True))]
            except psutil.Error:  # stopped since it was recorded
                continue
            owners.update(dict.fromkeys(tree, deployment.name))
    return owners


def deployment_gpu_use(
    nvml: Any, owners: Mapping[int, str], since_us: int
) -> list[DeploymentGpuUse]:
    """What the processes in `owners` (pid -> deployment) use of each GPU NVML sees.

    Args:
        nvml: the initialised NVML module, or an object of its shape.
        owners: the deployment each process belongs to; other processes are left out.
        since_us: utilisation samples taken before this (microseconds since the epoch)
            are left out.
    """
    try:
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError:
        return []
    uses: list[DeploymentGpuUse] = []
    for index in range(count):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            holders = [
                *nvml.nvmlDeviceGetComputeRunningProcesses(handle),
                *nvml.nvmlDeviceGetGraphicsRunningProcesses(handle),
            ]
        except nvml.NVMLError:
            continue
        memory: dict[int, int] = {}  # a process in both lists holds its memory once
        for holder in holders:
            if holder.pid in owners:
                memory[holder.pid] = max(memory.get(holder.pid, 0), holder.usedGpuMemory or 0)
        if memory:
            busy = _busy_by_pid(nvml, handle, since_us)
            found = _per_deployment(index, owners, memory, busy)
            if len(found) == 1 and all(holder.pid in memory for holder in holders):
                # one deployment holds the GPU alone: its draw is the deployment's
                found = [replace(found[0], power_watts=_power_watts(nvml, handle))]
            uses.extend(found)
    return uses


def _power_watts(nvml: Any, handle: Any) -> float | None:
    try:
        return float(nvml.nvmlDeviceGetPowerUsage(handle)) / 1000  # milliwatts
    except nvml.NVMLError:  # NOT_SUPPORTED on some boards
        return None


def _busy_by_pid(nvml: Any, handle: Any, since_us: int) -> dict[int, float] | None:
    """Each process's mean SM share over its samples since `since_us`; None: not kept."""
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except nvml.NVMLError as error:
        # NOT_FOUND (or SUCCESS on an empty first call, as pynvml raises it): nothing ran
        if getattr(error, "value", None) in (nvml.NVML_SUCCESS, nvml.NVML_ERROR_NOT_FOUND):
            return {}
        return None
    shares: dict[int, list[float]] = defaultdict(list)
    for sample in samples:
        if sample.timeStamp >= since_us:
            shares[sample.pid].append(sample.smUtil / 100)
    return {pid: sum(values) / len(values) for pid, values in shares.items()}


def _per_deployment(
    gpu: int, owners: Mapping[int, str], memory: dict[int, int], busy: dict[int, float] | None
) -> list[DeploymentGpuUse]:
    totals: dict[str, int] = defaultdict(int)
    shares: dict[str, float] = defaultdict(float)
    for pid, used in memory.items():
        totals[owners[pid]] += used
        if busy is not None:
            shares[owners[pid]] += busy.get(pid, 0.0)
    return [
        DeploymentGpuUse(name, gpu, used, None if busy is None else min(shares[name], 1.0))
        for name, used in sorted(totals.items())
    ]
