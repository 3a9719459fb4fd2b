"""Training runs and registered model versions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("experiment", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column(
            "dataset_version_id", sa.String(32), sa.ForeignKey("dataset_versions.id"), nullable=True
        ),
        sa.Column("parent_run_id", sa.String(32), sa.ForeignKey("runs.id"), nullable=True),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("ended_at", _TS, nullable=True),
        sa.Column("heartbeat_at", _TS, nullable=False),
        sa.Column("lease_seconds", sa.Integer, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_by", sa.String(128), nullable=False),
    )
    op.create_index("ix_runs_name", "runs", ["name"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_dataset_version_id", "runs", ["dataset_version_id"])
    op.create_index("ix_runs_parent_run_id", "runs", ["parent_run_id"])
    op.create_table(
        "model_versions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column(
            "dataset_version_id", sa.String(32), sa.ForeignKey("dataset_versions.id"), nullable=True
        ),
        sa.Column("parent", sa.String(256), nullable=True),
        sa.Column("artifact_digest", sa.String(64), nullable=False),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.UniqueConstraint("name", "version"),
    )
    op.create_index("ix_model_versions_name", "model_versions", ["name"])
    op.create_index("ix_model_versions_run_id", "model_versions", ["run_id"])
    op.create_index(
        "ix_model_versions_dataset_version_id", "model_versions", ["dataset_version_id"]
    )
    op.create_index("ix_model_versions_parent", "model_versions", ["parent"])


def downgrade() -> None:
    op.drop_table("model_versions")
    op.drop_table("runs")
