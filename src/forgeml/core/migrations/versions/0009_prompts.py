"""Prompts: immutable prompt versions and the aliases that point at them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "prompt_versions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, index=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("content", sa.JSON, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.UniqueConstraint("name", "version"),
        sa.UniqueConstraint("name", "digest"),
    )
    op.create_table(
        "prompt_aliases",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("alias", sa.String(128), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("prompt_aliases")
    op.drop_table("prompt_versions")
