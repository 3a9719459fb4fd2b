"""Labelling: tasks over dataset versions, leased items and annotators' labels.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "label_tasks",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column(
            "dataset_version_id",
            sa.String(32),
            sa.ForeignKey("dataset_versions.id"),
            nullable=False,
        ),
        sa.Column("dataset_ref", sa.String(160), nullable=False),
        sa.Column("label_schema", sa.JSON, nullable=False),
        sa.Column("instructions", sa.Text, nullable=False),
        sa.Column("assignees", sa.JSON, nullable=False),
        sa.Column("overlap", sa.Integer, nullable=False),
        sa.Column("lease_seconds", sa.Integer, nullable=False),
        sa.Column("strategy", sa.String(32), nullable=False),
        sa.Column("model_ref", sa.String(160), nullable=True),
        sa.Column("item_order", sa.JSON, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "label_leases",
        sa.Column("task_id", sa.String(32), sa.ForeignKey("label_tasks.id"), primary_key=True),
        sa.Column("item", sa.Integer, primary_key=True),
        sa.Column("annotator", sa.String(128), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "label_annotations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("task_id", sa.String(32), sa.ForeignKey("label_tasks.id"), nullable=False),
        sa.Column("item", sa.Integer, nullable=False),
        sa.Column("annotator", sa.String(128), nullable=False),
        sa.Column("value", sa.JSON, nullable=True),
        sa.Column("adjudicated", sa.Boolean, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("task_id", "item", "annotator"),
    )
    op.create_index("ix_label_annotations_task_id", "label_annotations", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_label_annotations_task_id", "label_annotations")
    op.drop_table("label_annotations")
    op.drop_table("label_leases")
    op.drop_table("label_tasks")
