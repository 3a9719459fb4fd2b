"""Pipelines: runs, their step runs, and the content-keyed step cache.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pipeline_runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, index=True),
        sa.Column("file", sa.Text, nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("finished_at", _TS, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_table(
        "pipeline_step_runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("pipeline_runs.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("cached", sa.Boolean, nullable=False),
        sa.Column("cache_key", sa.String(64), nullable=True, index=True),
        sa.Column("job_id", sa.String(32), nullable=True),
        sa.Column("outputs", sa.JSON, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("started_at", _TS, nullable=True),
        sa.Column("finished_at", _TS, nullable=True),
        sa.UniqueConstraint("run_id", "name"),
    )
    op.create_table(
        "pipeline_cache",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("outputs", sa.JSON, nullable=False),
        sa.Column("parts", sa.JSON, nullable=False),
        sa.Column(
            "step_run_id",
            sa.String(32),
            sa.ForeignKey("pipeline_step_runs.id"),
            nullable=False,
        ),
        sa.Column("created_at", _TS, nullable=False),
    )


def downgrade() -> None:
    for table in ("pipeline_cache", "pipeline_step_runs", "pipeline_runs"):
        op.drop_table(table)
