"""Prompt traffic splits: the aliases of a prompt a caller without a selector is sent to.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "prompt_splits",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("alias", sa.String(128), primary_key=True),
        sa.Column("weight", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("prompt_splits")
