"""Prompts belong to a project too (issue 15): `prompt_versions` gains `project`, indexed
(a list shows one project's prompts). Every row there before belongs to `default`. A
prompt's name stays unique across projects, so its aliases and split rows need none.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

TABLES = ("prompt_versions",)


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
