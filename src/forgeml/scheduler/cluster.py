"""What the cluster has: this machine for the local executor, or what an executor reports.

An executor that knows its cluster (Ray, Kubernetes) exposes `nodes() -> list[NodeState]`;
the local executor's one node is this machine, narrowed by `FORGEML_SCHEDULER_CPUS`,
`FORGEML_SCHEDULER_GPUS` and `FORGEML_SCHEDULER_MEMORY_GB`.
"""

from __future__ import annotations

import os
from typing import Any

import psutil

from forgeml.core.config import Settings
from forgeml.scheduler.model import NodeState, Resources

LOCAL_NODE = "local"


def gpu_count() -> int:
    """GPUs NVML sees on this machine (0 without a driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no device: no GPUs
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def local_capacity(settings: Settings) -> Resources:
    """This machine's CPUs, GPUs and memory, as the settings narrow them."""
    cpus = settings.scheduler_cpus or float(len(os.sched_getaffinity(0)))
    gpus = settings.scheduler_gpus if settings.scheduler_gpus is not None else gpu_count()
    memory = settings.scheduler_memory_gb or psutil.virtual_memory().total / 1e9
    return Resources(cpus, gpus, memory)


def local_cluster(settings: Settings) -> list[NodeState]:
    """The local executor's cluster: one node, all of it free."""
    capacity = local_capacity(settings)
    return [NodeState(LOCAL_NODE, capacity, capacity)]


def cluster_of(executor: Any, settings: Settings) -> list[NodeState]:
    """The nodes `executor` runs on, all free (the service subtracts what runs)."""
    nodes = getattr(executor, "nodes", None)
    if callable(nodes):
        return [NodeState(n.name, n.capacity, n.capacity) for n in nodes()]
    return local_cluster(settings)
