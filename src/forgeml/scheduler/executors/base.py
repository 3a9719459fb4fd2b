"""The one interface every executor implements; the scheduling policy never sees which runs a job.

An executor starts one attempt of a job, reports whether it is still running, stops it, and,
after the control plane restarts, finds attempts it started before (`adopt`). It knows
nothing about queues or priorities: the service decides, the executor carries out.

Worker layout follows torchrun's environment contract: a job with `workers: N` runs its
command once per worker with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set,
unless `launch_once` is set (forgeml's own train/finetune/tune commands start their workers
themselves with torchrun, from the config's `workers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from forgeml.scheduler.model import Resources


@dataclass(frozen=True)
class LaunchRequest:
    """One attempt of one job, placed: what to run, where and with what."""

    job_id: str
    attempt: int  # 1 for the first try
    command: list[str]
    env: dict[str, str]  # job environment (tracking URI, data paths, FORGEML_JOB_ID, ...)
    workers: int
    resources: Resources  # per worker
    nodes: tuple[str, ...]  # the node of each worker, from the policy's Placement
    log_path: Path  # where the attempt's combined stdout/stderr goes (local file)
    cwd: Path | None = None
    launch_once: bool = False  # the command starts its own workers
    timeout_seconds: float | None = None


@dataclass(frozen=True)
class AttemptHandle:
    """How an executor finds a running attempt again (persisted as `external_id`)."""

    executor: str
    external_id: str  # local: "pid:start_time"; ray: placement group/task ids; k8s: name


@dataclass(frozen=True)
class AttemptUsage:
    """Resources an attempt used, measured from its processes."""

    cpu_seconds: float = 0.0
    gpu_seconds: float = 0.0
    memory_gb_seconds: float = 0.0
    peak_memory_gb: float = 0.0
    wall_seconds: float = 0.0
    # NVML readings of the GPUs the attempt held (None: no GPU or no NVML: absent, not 0)
    gpu_utilization: float | None = None  # time-weighted mean, 0-1 per GPU
    gpu_peak_memory_bytes: int | None = None
    gpu_energy_joules: float | None = None


@dataclass(frozen=True)
class AttemptStatus:
    """What `poll` found: still running, or ended with an exit code and a reason."""

    running: bool
    exit_code: int | None = None  # None while running; negative: killed by that signal
    reason: str | None = None  # e.g. "exceeded its memory limit of 2 GB", "timed out"
    usage: AttemptUsage = field(default_factory=AttemptUsage)


class Executor(Protocol):
    """Runs job attempts somewhere (this machine, a Ray cluster, Kubernetes)."""

    name: str

    def launch(self, request: LaunchRequest) -> AttemptHandle:
        """Start the attempt; returns at once."""
        ...

    def poll(self, handle: AttemptHandle) -> AttemptStatus:
        """The attempt's state now, with its resource use so far."""
        ...

    def terminate(self, handle: AttemptHandle, grace_seconds: float) -> None:
        """SIGTERM (the trainer checkpoints and exits), then kill after `grace_seconds`."""
        ...

    def adopt(self, handle: AttemptHandle) -> bool:
        """After a control-plane restart: True when the attempt is still alive here."""
        ...


@dataclass(frozen=True)
class Gang:
    """The resource shapes one job needs all at once: one per worker (or one in all for a
    job that starts its own workers), as the executor would reserve them."""

    job_id: str
    shapes: tuple[Resources, ...]


@runtime_checkable
class Recovering(Protocol):
    """An executor that finds an attempt by its log path alone (the local executor).

    The service records an attempt, launches it, then records its handle; a control plane
    killed in between leaves an attempt with no handle. `startup` asks `recover` for it
    before taking it for lost, so the job is not started a second time beside it.
    """

    def recover(self, log_path: Path) -> AttemptHandle | None:
        """The attempt launched for `log_path`, or None when none was started."""
        ...


@runtime_checkable
class DemandReporter(Protocol):
    """An executor whose cluster grows on demand (Ray's autoscaler).

    The service calls `report_demand` when its view of demand changes: the gangs running
    and the gangs waiting for room, or an empty list when nothing waits (withdraw the
    request and let the cluster shrink back). On Kubernetes no call is needed: a pending
    pod carries its resource requests, which the cluster autoscaler reads itself.
    """

    def report_demand(self, gangs: list[Gang]) -> None:
        """Ask the cluster for room for all of `gangs` at once (replaces the last ask)."""
        ...
