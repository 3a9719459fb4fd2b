"""Labelling tasks, their leased items and the labels annotators give.

A `label_tasks` row is one task over one dataset version: its label schema, instructions,
assignees, how many annotators label each item (`overlap`), the order items are served in
(`item_order`: row positions of the version, most informative first) and how that order was
chosen (`strategy`, `model_ref`). `label_leases` holds who is labelling which item until
when: an item is served to one annotator at a time. `label_annotations` holds one label per
(task, item, annotator); an adjudicator's label (`adjudicated`) settles an item at export.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class LabelTaskRecord(Base):
    """One labelling task over a dataset version."""

    __tablename__ = "label_tasks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # the project it belongs to (migration 0024)
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    dataset_version_id: Mapped[str] = mapped_column(ForeignKey("dataset_versions.id"))
    dataset_ref: Mapped[str] = mapped_column(String(160))
    # LabelSchema as JSON: kind (classes | spans | boxes), classes, the column shown
    label_schema: Mapped[dict[str, Any]] = mapped_column(JSON)
    instructions: Mapped[str] = mapped_column(Text, default="")
    assignees: Mapped[list[Any]] = mapped_column(JSON)
    overlap: Mapped[int] = mapped_column(Integer)
    lease_seconds: Mapped[int] = mapped_column(Integer)
    strategy: Mapped[str] = mapped_column(String(32))
    model_ref: Mapped[str | None] = mapped_column(String(160), nullable=True)
    item_order: Mapped[list[Any]] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LabelLeaseRecord(Base):
    """An item served to an annotator, theirs until `expires_at`."""

    __tablename__ = "label_leases"

    task_id: Mapped[str] = mapped_column(ForeignKey("label_tasks.id"), primary_key=True)
    item: Mapped[int] = mapped_column(Integer, primary_key=True)
    annotator: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class LabelAnnotationRecord(Base):
    """One annotator's label of one item (submitted or imported)."""

    __tablename__ = "label_annotations"
    __table_args__ = (UniqueConstraint("task_id", "item", "annotator"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("label_tasks.id"), index=True)
    item: Mapped[int] = mapped_column(Integer)
    annotator: Mapped[str] = mapped_column(String(128))
    value: Mapped[Any] = mapped_column(JSON)
    adjudicated: Mapped[bool] = mapped_column(Boolean, default=False)
    source: Mapped[str] = mapped_column(String(16))  # submit | import
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
