"""Alerts (fired by forgeml's own rule evaluation or received from Alertmanager) and the
notifications sent for them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False, index=True),
        sa.Column("active_key", sa.String(96), nullable=True, unique=True),
        sa.Column("rule", sa.String(256), nullable=False, index=True),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("annotations", sa.JSON, nullable=False),
        sa.Column("severity", sa.String(32), nullable=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("value", sa.Float, nullable=True),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("fired_at", _TS, nullable=True),
        sa.Column("fire_seq", sa.Integer, nullable=True, unique=True),
        sa.Column("resolved_at", _TS, nullable=True),
        sa.Column("acked_at", _TS, nullable=True),
        sa.Column("acked_by", sa.String(128), nullable=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("generator_url", sa.Text, nullable=True),
        sa.Column("updated_at", _TS, nullable=False),
    )
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "alert_id", sa.String(32), sa.ForeignKey("alerts.id"), nullable=False, index=True
        ),
        sa.Column("channel", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("sent_at", _TS, nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
        sa.UniqueConstraint("alert_id", "channel", "status"),
    )


def downgrade() -> None:
    for table in ("alert_deliveries", "alerts"):
        op.drop_table(table)
