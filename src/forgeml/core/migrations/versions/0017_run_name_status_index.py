"""An index for the run list filtered by name and status (a sweep's finished runs).

With equalities on both name and status, SQLite's planner (no statistics) picked the status
index and read about a hundred rows of other names for each one it kept at 100k runs over
100 names; (name, status, started_at, id) reads the page's rows and no other, newest
first, on SQLite and PostgreSQL alike.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_runs_name_status_started_at_id", "runs", ["name", "status", "started_at", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_runs_name_status_started_at_id", "runs")
