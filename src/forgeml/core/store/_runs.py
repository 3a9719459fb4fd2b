"""Training runs and registered model versions: the lineage dataset -> run -> model.

MLflow keeps the curves and files; these rows keep what forgeml must be able to answer on
its own (which data, which config, which parent model, is the process still alive).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forgeml.core.store._models import Base, DatasetVersion, utcnow


class RunRecord(Base):
    """One training run; `id` is the MLflow run id, `status` mirrors MLflow's."""

    __tablename__ = "runs"
    # the API's run list is one project's runs, newest first by (started_at, id) in keyset
    # pages, most often filtered by status: without these every page sorted all matching
    # runs (0013); by name (0016), by name and status (0017); led by the project (0019)
    __table_args__ = (
        Index("ix_runs_project_started_at_id", "project", "started_at", "id"),
        Index("ix_runs_project_status_started_at_id", "project", "status", "started_at", "id"),
        Index("ix_runs_project_name_started_at_id", "project", "name", "started_at", "id"),
        Index(
            "ix_runs_project_name_status_started_at_id",
            "project",
            "name",
            "status",
            "started_at",
            "id",
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # the project it belongs to (the indexes above lead with it)
    project: Mapped[str] = mapped_column(String(128), default="default", server_default="default")
    name: Mapped[str] = mapped_column(String(128), index=True)
    experiment: Mapped[str] = mapped_column(String(256))
    # RUNNING, FINISHED, FAILED or KILLED
    status: Mapped[str] = mapped_column(String(16), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    dataset_version_id: Mapped[str | None] = mapped_column(
        ForeignKey("dataset_versions.id"), index=True
    )
    parent_run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id"), index=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # a RUNNING run whose heartbeat is older than its lease has lost its process
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    lease_seconds: Mapped[int] = mapped_column(Integer)
    pid: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(255))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(128))

    # eager: runs are read in one session and shown after it closes
    dataset_version: Mapped[DatasetVersion | None] = relationship(lazy="joined")


class ModelVersionRecord(Base):
    """One registered model version (`version` is MLflow's registry version number)."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    # the project its model belongs to (a model's name stays unique across every project)
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    version: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    dataset_version_id: Mapped[str | None] = mapped_column(
        ForeignKey("dataset_versions.id"), index=True
    )
    # NAME@vN of the model this one was adapted, distilled or quantised from
    parent: Mapped[str | None] = mapped_column(String(256), index=True)
    # forgeml artifact-store digest of the bundle's tar
    artifact_digest: Mapped[str] = mapped_column(String(64))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))

    run: Mapped[RunRecord] = relationship(lazy="joined")
    dataset_version: Mapped[DatasetVersion | None] = relationship(lazy="joined")

    @property
    def ref(self) -> str:
        return f"{self.name}@v{self.version}"
