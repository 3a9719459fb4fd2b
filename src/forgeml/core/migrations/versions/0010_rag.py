"""RAG indexes and their immutable versions.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "rag_indexes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
    )
    op.create_table(
        "rag_index_versions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("index_id", sa.String(32), sa.ForeignKey("rag_indexes.id"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("artifact", sa.String(64), nullable=False),
        sa.Column("chunks", sa.Integer, nullable=False),
        sa.Column("documents", sa.Integer, nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("sources", sa.JSON, nullable=False),
        sa.Column("stats", sa.JSON, nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.UniqueConstraint("index_id", "version"),
    )
    op.create_index("ix_rag_index_versions_index_id", "rag_index_versions", ["index_id"])
    op.create_index("ix_rag_index_versions_digest", "rag_index_versions", ["digest"])


def downgrade() -> None:
    op.drop_table("rag_index_versions")
    op.drop_table("rag_indexes")
