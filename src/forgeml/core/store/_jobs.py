"""Scheduler records: queues, jobs, their attempts and every state change.

A job row is the latest word on a job; `job_attempts` keeps one row per try (where it ran,
how it ended, what it used and cost); `job_events` is the timestamped history of every
state change, appended in the same transaction as the change itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class QueueRecord(Base):
    """A queue with Volcano's semantics: weight, capability (hard cap), reclaimable, budget."""

    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    weight: Mapped[int] = mapped_column(Integer)
    # {"cpus": float, "gpus": int, "memory_gb": float} or None for no cap
    capability: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    reclaimable: Mapped[bool] = mapped_column(Boolean)
    budget: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class JobRecord(Base):
    """One job as submitted (`spec` is `JobSpec.model_dump()`) and where it stands now."""

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    # the project it belongs to
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    kind: Mapped[str] = mapped_column(String(32))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    queue: Mapped[str] = mapped_column(ForeignKey("queues.name"), index=True)
    priority: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    # a JobState value
    state: Mapped[str] = mapped_column(String(16), index=True)
    executor: Mapped[str] = mapped_column(String(32))
    # the config's `name` for train/finetune/tune jobs
    model_name: Mapped[str | None] = mapped_column(String(128), index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # a failed job waiting out its retry back-off is not scheduled before this
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    submitted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    error: Mapped[str | None] = mapped_column(Text)


class JobAttemptRecord(Base):
    """One try of a job: where it ran, how it ended, what it used and what that cost."""

    __tablename__ = "job_attempts"
    __table_args__ = (UniqueConstraint("job_id", "number"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    executor: Mapped[str] = mapped_column(String(32))
    # how the executor finds the attempt again (local: "pid:create_time")
    external_id: Mapped[str | None] = mapped_column(String(512))
    nodes: Mapped[list[Any]] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(Text)
    # FORGEML_HOME/logs/jobs/<job>/<n>.log while running; the artifact digest after the end
    log_path: Mapped[str | None] = mapped_column(String(1024))
    log_digest: Mapped[str | None] = mapped_column(String(64))
    cpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    memory_gb_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    peak_memory_gb: Mapped[float] = mapped_column(Float, default=0.0)
    wall_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    # NVML over the GPUs the attempt held; NULL without a GPU (absent, not 0)
    gpu_utilization: Mapped[float | None] = mapped_column(Float)
    gpu_peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_energy_joules: Mapped[float | None] = mapped_column(Float)


class JobEventRecord(Base):
    """One state change of a job, timestamped (`from_state` is None at submit)."""

    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int | None] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
