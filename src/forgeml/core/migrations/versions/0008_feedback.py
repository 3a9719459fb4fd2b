"""Feedback: labels joined to the predictions they judge.

Revision ID: 0008
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "feedback",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("model", sa.String(128), nullable=False, index=True),
        sa.Column("model_ref", sa.String(256), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("row", sa.Integer, nullable=False),
        sa.Column("predicted_at", _TS, nullable=False),
        sa.Column("features", sa.JSON, nullable=False),
        sa.Column("prediction", sa.JSON, nullable=False),
        sa.Column("label", sa.JSON, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.UniqueConstraint("model", "request_id", "row"),
    )


def downgrade() -> None:
    op.drop_table("feedback")
