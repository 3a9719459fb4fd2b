"""Resources belong to a project: datasets, runs, registered model versions, jobs and
deployments gain `project` (issue 15). Every row there before belongs to `default`.

The run list's indexes lead with the project now (a list shows one project's runs):
(project, started_at, id) and its status / name / name-and-status siblings replace the
ones of 0013, 0016 and 0017.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

TABLES = ("datasets", "runs", "model_versions", "jobs", "deployments")
# (old name, new name, columns after project)
RUN_INDEXES = (
    ("ix_runs_started_at_id", "ix_runs_project_started_at_id", ["started_at", "id"]),
    (
        "ix_runs_status_started_at_id",
        "ix_runs_project_status_started_at_id",
        ["status", "started_at", "id"],
    ),
    (
        "ix_runs_name_started_at_id",
        "ix_runs_project_name_started_at_id",
        ["name", "started_at", "id"],
    ),
    (
        "ix_runs_name_status_started_at_id",
        "ix_runs_project_name_status_started_at_id",
        ["name", "status", "started_at", "id"],
    ),
)


def upgrade() -> None:
    for table in TABLES:
        op.add_column(
            table,
            sa.Column("project", sa.String(128), nullable=False, server_default="default"),
        )
        if table != "runs":
            op.create_index(f"ix_{table}_project", table, ["project"])
    for old, new, columns in RUN_INDEXES:
        op.drop_index(old, "runs")
        op.create_index(new, "runs", ["project", *columns])


def downgrade() -> None:
    for old, new, columns in RUN_INDEXES:
        op.drop_index(new, "runs")
        op.create_index(old, "runs", columns)
    for table in TABLES:
        if table != "runs":
            op.drop_index(f"ix_{table}_project", table)
        op.drop_column(table, "project")
