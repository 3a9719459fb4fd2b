"""RAG indexes belong to a project too (issue 15): `rag_indexes` gains `project`, indexed
(a list shows one project's indexes). Every index there before belongs to `default`. An
index's name stays unique across projects, so its versions need none.

Revision ID: 0022
Revises: 0021 (0020 is another change's; the chain is re-linked when both are merged)
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

TABLES = ("rag_indexes",)


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table,
            sa.Column("project", sa.String(128), nullable=False, server_default="default"),
        )
        op.create_index(f"ix_{table}_project", table, ["project"])


def downgrade() -> None:
    for table in TABLES:
        op.drop_index(f"ix_{table}_project", table)
        op.drop_column(table, "project")
