"""Curve previews (issue 16): each ended run's metric curves, LTTB-downsampled when the run
ends, keyed by run and metric with the metric's latest value they were made from.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "curve_previews",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("key", sa.String(250), primary_key=True),
        sa.Column("step", sa.BigInteger, nullable=False),
        sa.Column("timestamp", sa.BigInteger, nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=False),
        sa.Column("is_nan", sa.Boolean, nullable=False),
        sa.Column("points", sa.Integer, nullable=False),
        sa.Column("length", sa.Integer, nullable=False),
        sa.Column("steps", sa.LargeBinary, nullable=False),
        sa.Column("values", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("curve_previews")
