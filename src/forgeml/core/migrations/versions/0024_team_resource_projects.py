"""Alerts, labelling tasks and gateway keys belong to a project too (issue 15): `alerts`,
`label_tasks` and `api_keys` gain `project`, indexed (a list shows one project's). Every row
there before belongs to `default`. An alert's deliveries, a task's leases and annotations
and a key's usage belong to their alert's, task's and key's project, so they need none. A
labelling task's name stays unique across projects; a key's prefix is unique already.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

TABLES = ("alerts", "label_tasks", "api_keys")


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
