"""RAG indexes and their immutable versions (snapshots).

A version's `digest` covers its live chunks and its config (chunker, dense index,
embedder); `artifact` is the digest of its SQLite index file in the artifact store;
`sources` is its lineage: each source spec with its kind and the digest it had when read.
An index belongs to one project (`rag_indexes.project`, migration 0022).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from forgeml.core.store._models import Base, utcnow


class RagIndexRecord(Base):
    """A named RAG index."""

    __tablename__ = "rag_indexes"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # the project it belongs to; its name stays unique across every project
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class RagIndexVersionRecord(Base):
    """One immutable snapshot of a RAG index."""

    __tablename__ = "rag_index_versions"
    __table_args__ = (UniqueConstraint("index_id", "version"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    index_id: Mapped[str] = mapped_column(ForeignKey("rag_indexes.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(64), index=True)
    artifact: Mapped[str] = mapped_column(String(64))
    chunks: Mapped[int] = mapped_column(Integer)
    documents: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    sources: Mapped[list[Any]] = mapped_column(JSON)
    # what building it did: documents added/changed/removed, chunks embedded/reused, ...
    stats: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))

    index: Mapped[RagIndexRecord] = relationship(lazy="joined")

    @property
    def ref(self) -> str:
        return f"{self.index.name}@v{self.version}"
