"""Initial tables: datasets, versions, lineage, feature specs, audit events.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
    )
    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("dataset_id", sa.String(32), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("schema", sa.JSON, nullable=False),
        sa.Column("profile", sa.JSON, nullable=False),
        sa.Column("recipe", sa.JSON, nullable=False),
        sa.Column("report", sa.JSON, nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.UniqueConstraint("dataset_id", "version"),
    )
    op.create_index("ix_dataset_versions_dataset_id", "dataset_versions", ["dataset_id"])
    op.create_index("ix_dataset_versions_digest", "dataset_versions", ["digest"])
    op.create_table(
        "dataset_lineage",
        sa.Column(
            "child_id", sa.String(32), sa.ForeignKey("dataset_versions.id"), primary_key=True
        ),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("parent_id", sa.String(32), sa.ForeignKey("dataset_versions.id"), nullable=False),
    )
    op.create_index("ix_dataset_lineage_parent_id", "dataset_lineage", ["parent_id"])
    op.create_table(
        "feature_specs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column(
            "dataset_version_id",
            sa.String(32),
            sa.ForeignKey("dataset_versions.id"),
            nullable=False,
        ),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.UniqueConstraint("name", "version"),
    )
    op.create_index("ix_feature_specs_name", "feature_specs", ["name"])
    op.create_table(
        "audit_events",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", _TS, nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("object_ref", sa.String(256), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("payload_digest", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False, unique=True),
    )


def downgrade() -> None:
    for table in ("audit_events", "feature_specs", "dataset_lineage", "dataset_versions"):
        op.drop_table(table)
    op.drop_table("datasets")
