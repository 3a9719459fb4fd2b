"""Pipeline triggers (cron schedules, new dataset versions) and the events they fired for.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pipeline_triggers",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("file", sa.Text, nullable=False),
        sa.Column("overrides", sa.JSON, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("subject", sa.String(256), nullable=False),
        sa.Column("cursor", sa.String(64), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
    )
    op.create_table(
        "pipeline_firings",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "trigger_id",
            sa.String(32),
            sa.ForeignKey("pipeline_triggers.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("event", sa.String(256), nullable=False),
        sa.Column("fired_at", _TS, nullable=False),
        sa.Column("job_id", sa.String(32), nullable=True),
        sa.UniqueConstraint("trigger_id", "event"),
    )


def downgrade() -> None:
    for table in ("pipeline_firings", "pipeline_triggers"):
        op.drop_table(table)
