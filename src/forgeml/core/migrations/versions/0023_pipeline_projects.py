"""Pipelines belong to a project too (issue 15): `pipeline_runs` and `pipeline_triggers`
gain `project`, indexed (a list shows one project's runs and triggers). Every run and
trigger there before belongs to `default`. A run's steps and a trigger's firings belong to
their run's and trigger's project, so they need none. A trigger's name stays unique across
projects; a pipeline's name is not unique (one row per run), so two projects may both run
a pipeline called `train`.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

TABLES = ("pipeline_runs", "pipeline_triggers")


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
