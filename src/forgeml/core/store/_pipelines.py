"""Pipeline records: each run of a pipeline, each step's run in it, and the step cache.

A `pipeline_runs` row is one run of a pipeline file (its resolved spec kept as JSON);
`pipeline_step_runs` holds one row per step of that run (state, whether it came from the
cache, its job, its outputs); `pipeline_cache` maps a step's content key (a sha256, see
`forgeml.pipelines.cache`) to the outputs of the step run that first produced them.

`pipeline_triggers` holds what starts a pipeline by itself (a cron schedule, a new dataset
version) with its cursor, the last event it handled; `pipeline_firings` holds one row per
event a trigger fired for, unique per (trigger, event), so an event fires at most once.
A run and a trigger belong to one project (`project`, migration 0023); a run's steps and a
trigger's firings to theirs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forgeml.core.store._models import Base, utcnow


class PipelineRunRecord(Base):
    """One run of a pipeline: its name, file, resolved spec and how it ended."""

    __tablename__ = "pipeline_runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    # the project it ran in (its steps' jobs too); pipeline names are not unique
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    file: Mapped[str] = mapped_column(Text)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    # RUNNING, SUCCEEDED or FAILED
    state: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)

    steps: Mapped[list[PipelineStepRunRecord]] = relationship(
        order_by="PipelineStepRunRecord.position", lazy="selectin"
    )


class PipelineStepRunRecord(Base):
    """One step of one pipeline run: PENDING -> RUNNING -> SUCCEEDED | FAILED, or SKIPPED."""

    __tablename__ = "pipeline_step_runs"
    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("pipeline_runs.id"), index=True)
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))
    position: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    cache_key: Mapped[str | None] = mapped_column(String(64), index=True)
    job_id: Mapped[str | None] = mapped_column(String(32))
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class PipelineCacheRecord(Base):
    """A step's content key and the outputs the step run that first had it produced."""

    __tablename__ = "pipeline_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON)
    # what went into the key (kind, params, input digests, code, packages, env), to explain
    # a miss; the key itself is the digest of it
    parts: Mapped[dict[str, Any]] = mapped_column(JSON)
    step_run_id: Mapped[str] = mapped_column(ForeignKey("pipeline_step_runs.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PipelineTriggerRecord(Base):
    """A pipeline file (with its overrides) run whenever an event of `kind` happens."""

    __tablename__ = "pipeline_triggers"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # the project its firings' pipelines run in; its name stays unique across every project
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    file: Mapped[str] = mapped_column(Text)  # absolute
    overrides: Mapped[list[str]] = mapped_column(JSON, default=list)
    # cron or dataset (see forgeml.pipelines.triggers.TriggerKind)
    kind: Mapped[str] = mapped_column(String(16))
    # what the kind watches: the cron expression, or the dataset's name
    subject: Mapped[str] = mapped_column(String(256))
    # the last event handled, as the kind writes it: a cron slot's ISO time, a version number
    cursor: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class PipelineFiringRecord(Base):
    """One event a trigger fired for, and the job that runs its pipeline (once submitted)."""

    __tablename__ = "pipeline_firings"
    __table_args__ = (UniqueConstraint("trigger_id", "event"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    trigger_id: Mapped[str] = mapped_column(ForeignKey("pipeline_triggers.id"), index=True)
    # the event's key: a cron slot's ISO time, a dataset version's reference
    event: Mapped[str] = mapped_column(String(256))
    fired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    job_id: Mapped[str | None] = mapped_column(String(32))
