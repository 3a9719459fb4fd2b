"""The scheduler's nouns: resources, queues, job specs, job states, and the policy's view.

`JobSpec` and `QueueSpec` cross process boundaries (CLI, YAML, HTTP), so they are pydantic
models validated where they enter; what the policy sees of the cluster and the jobs is
plain dataclasses (`NodeState`, `PendingJob`, `RunningJob`), so the same policy code runs
the real scheduler and the simulator in `benchmarks/scheduler_sim.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt


class JobState(StrEnum):
    """A job's life: PENDING -> SCHEDULED -> RUNNING -> a final state (PREEMPTED -> PENDING)."""

    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    PREEMPTED = "PREEMPTED"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

JobKind = Literal[
    "train",
    "finetune",
    "tune",
    "evaluate",
    "optimize",
    "data",
    "batch-predict",
    "command",
    "release",
]

# Volcano/Kubernetes-style priority classes; a bigger value is more important
PRIORITY_CLASSES: dict[str, int] = {"low": 0, "normal": 100, "high": 1000, "critical": 10_000}


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of CPUs, GPUs and memory (GB): a request per worker, or a capacity."""

    cpus: float = 0.0
    gpus: int = 0
    memory_gb: float = 0.0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpus + other.cpus, self.gpus + other.gpus, self.memory_gb + other.memory_gb
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpus - other.cpus, self.gpus - other.gpus, self.memory_gb - other.memory_gb
        )

    def times(self, count: int) -> Resources:
        return Resources(self.cpus * count, self.gpus * count, self.memory_gb * count)

    def fits_in(self, capacity: Resources) -> bool:
        """True when every dimension of `self` is within `capacity` (small float slack)."""
        return (
            self.cpus <= capacity.cpus + 1e-9
            and self.gpus <= capacity.gpus
            and self.memory_gb <= capacity.memory_gb + 1e-9
        )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResourceRequest(_Strict):
    """What one worker of a job needs (validated form of `Resources`)."""

    cpus: NonNegativeFloat = Field(1.0, description="CPU cores per worker.")
    gpus: NonNegativeInt = Field(0, description="GPUs per worker.")
    memory_gb: NonNegativeFloat = Field(1.0, description="Memory per worker, in GB.")

    def to_resources(self) -> Resources:
        return Resources(self.cpus, self.gpus, self.memory_gb)


class JobSpec(_Strict):
    """Everything needed to run a job, as submitted."""

    name: str = Field(description="A short human name; defaults to the command's first word.")
    kind: JobKind = Field("command", description="What the job does.")
    command: list[str] = Field(min_length=1, description="The program and its arguments.")
    resources: ResourceRequest = Field(default_factory=ResourceRequest)
    workers: PositiveInt = Field(1, description="Processes started together (gang).")
    queue: str = Field("default", description="The queue the job waits in.")
    priority: str = Field("normal", description="Priority class: " + ", ".join(PRIORITY_CLASSES))
    max_retries: NonNegativeInt = Field(0, description="Retries after a failed attempt.")
    backoff_seconds: NonNegativeFloat = Field(5.0, description="First retry delay; doubles.")
    timeout_seconds: NonNegativeFloat | None = Field(None, description="Wall-time limit.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment.")
    owner: str = Field(description="Who submitted the job.")
    scratch: str | None = Field(
        None,
        description="A folder of the job's own (the files a command job was sent with), "
        "removed when the job ends.",
    )

    @property
    def priority_value(self) -> int:
        return PRIORITY_CLASSES[self.priority]


class QueueSpec(_Strict):
    """A queue with Volcano's semantics (weight, capability, reclaimable)."""

    name: str
    weight: PositiveInt = Field(1, description="Proportional share of the cluster.")
    capability: ResourceRequest | None = Field(None, description="Hard cap on what it may use.")
    reclaimable: bool = Field(True, description="Its jobs may be preempted for other queues.")
    budget: NonNegativeFloat | None = Field(None, description="Spend alert threshold.")


# ---- the policy's view of the world (plain data; built by the service or the simulator)


@dataclass(slots=True)
class NodeState:
    """One node: what it has and what is still free."""

    name: str
    capacity: Resources
    free: Resources


@dataclass(frozen=True, slots=True)
class QueueState:
    name: str
    weight: int
    capability: Resources | None
    reclaimable: bool


@dataclass(frozen=True, slots=True)
class PendingJob:
    id: str
    queue: str
    priority: int
    demand: Resources  # per worker
    workers: int
    submitted_at: float  # seconds, any monotone clock; older first among equals


@dataclass(frozen=True, slots=True)
class RunningJob:
    id: str
    queue: str
    priority: int
    demand: Resources  # per worker
    placement: tuple[str, ...]  # node name of each worker
    started_at: float


@dataclass(frozen=True, slots=True)
class Placement:
    job_id: str
    nodes: tuple[str, ...]  # one node name per worker, in worker-rank order


@dataclass(slots=True)
class Decisions:
    """One scheduling cycle's outcome: jobs to start and running jobs to preempt."""

    place: list[Placement] = field(default_factory=list)
    preempt: list[str] = field(default_factory=list)
