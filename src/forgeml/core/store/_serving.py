"""Serving records: deployments (with every revision, for rollback), their replica
processes, API keys (salted hashes only) and per-key usage.

A deployment row is the latest word on a deployment; `deployment_revisions` keeps each spec
it has had, so `rollback` re-applies an earlier one; `deployment_replicas` is one row per
model-server process the control plane started. An API key is stored as a public prefix
(shown in lists, used to find the row) plus a salted hash of the secret; `key_usage` counts
requests per key, deployment and hour, which cost reports read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class DeploymentRecord(Base):
    """A named deployment and its current spec (a `DeploymentSpec` as JSON)."""

    __tablename__ = "deployments"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # the project it belongs to (names stay unique across every project)
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    # e.g. starting, ready, degraded, failed, deleted
    status: Mapped[str] = mapped_column(String(16), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    revision: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    error: Mapped[str | None] = mapped_column(Text)


class DeploymentRevisionRecord(Base):
    """One spec a deployment has had; revision numbers start at 1 and only grow."""

    __tablename__ = "deployment_revisions"
    __table_args__ = (UniqueConstraint("deployment_id", "revision"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    deployment_id: Mapped[str] = mapped_column(ForeignKey("deployments.id"), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class DeploymentReplicaRecord(Base):
    """One model-server process of a deployment: which model it serves and where."""

    __tablename__ = "deployment_replicas"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    deployment_id: Mapped[str] = mapped_column(ForeignKey("deployments.id"), index=True)
    # primary, canary or shadow
    role: Mapped[str] = mapped_column(String(16))
    model_ref: Mapped[str] = mapped_column(String(256))
    host: Mapped[str] = mapped_column(String(256))
    port: Mapped[int] = mapped_column(Integer)
    pid: Mapped[int | None] = mapped_column(Integer)
    # e.g. starting, ready, unhealthy, stopped
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ApiKeyRecord(Base):
    """An API key: its public prefix, a salted hash of its secret, scopes and limits."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(128))
    # the project it belongs to (migration 0024)
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    salt: Mapped[str] = mapped_column(String(64))
    secret_hash: Mapped[str] = mapped_column(String(128))
    # deployment names the key may call; ["*"] for all
    scopes: Mapped[list[Any]] = mapped_column(JSON)
    rate_per_s: Mapped[float | None] = mapped_column(Float)
    burst: Mapped[int | None] = mapped_column(Integer)
    # most requests per UTC day; None for no quota
    daily_quota: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class KeyUsageRecord(Base):
    """Requests one key sent to one deployment in one UTC hour (`period`: 2026-12-01T14)."""

    __tablename__ = "key_usage"
    __table_args__ = (UniqueConstraint("key_id", "deployment", "period"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    deployment: Mapped[str] = mapped_column(String(128), index=True)
    period: Mapped[str] = mapped_column(String(16), index=True)
    requests: Mapped[int] = mapped_column(Integer, default=0)
    errors: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms_total: Mapped[float] = mapped_column(Float, default=0.0)
