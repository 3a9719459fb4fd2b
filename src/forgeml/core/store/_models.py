"""Tables of the metadata store. Changing one means adding an Alembic migration."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, DateTime, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    """Now, timezone-aware UTC (stored as such on every backend)."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # the project it belongs to (names stay unique across every project)
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))

    versions: Mapped[list[DatasetVersion]] = relationship(
        back_populates="dataset", order_by="DatasetVersion.version"
    )


class DatasetVersion(Base):
    """One immutable, content-addressed version: a Parquet blob plus its lineage."""

    __tablename__ = "dataset_versions"
    __table_args__ = (UniqueConstraint("dataset_id", "version"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ForeignKey("datasets.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(64), index=True)
    rows: Mapped[int] = mapped_column(BigInteger)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    schema: Mapped[dict[str, Any]] = mapped_column(JSON)
    profile: Mapped[dict[str, Any]] = mapped_column(JSON)
    # {"op": "ingest" | "clean" | ..., "params": {...}}: enough to rebuild from the parents
    recipe: Mapped[dict[str, Any]] = mapped_column(JSON)
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))

    # eager: versions are read in one session and shown after it closes
    dataset: Mapped[Dataset] = relationship(back_populates="versions", lazy="joined")
    parent_edges: Mapped[list[LineageEdge]] = relationship(
        foreign_keys="LineageEdge.child_id", order_by="LineageEdge.position", lazy="selectin"
    )

    @property
    def ref(self) -> str:
        return f"{self.dataset.name}@v{self.version}"


class LineageEdge(Base):
    """`child` was derived from `parent` (position orders multiple parents)."""

    __tablename__ = "dataset_lineage"

    child_id: Mapped[str] = mapped_column(ForeignKey("dataset_versions.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    parent_id: Mapped[str] = mapped_column(ForeignKey("dataset_versions.id"), index=True)

    parent: Mapped[DatasetVersion] = relationship(foreign_keys=[parent_id], lazy="joined")


class FeatureSpecVersion(Base):
    """A fitted FeatureSpec (JSON artifact) that training and serving both apply."""

    __tablename__ = "feature_specs"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    version: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(64))
    dataset_version_id: Mapped[str] = mapped_column(ForeignKey("dataset_versions.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))

    dataset_version: Mapped[DatasetVersion] = relationship(lazy="joined")


class AuditEvent(Base):
    """One hash-chained audit record; `hash` covers every other field and `prev_hash`."""

    __tablename__ = "audit_events"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64))
    object_ref: Mapped[str] = mapped_column(String(256))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    payload_digest: Mapped[str] = mapped_column(String(64))
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64), unique=True)
