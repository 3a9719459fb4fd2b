"""An index for the run list filtered by name (a sweep's runs), newest first.

At 100k runs over 100 names, the status index alone reads about a hundred rows for each
one of a name it keeps; (name, started_at, id) reads only the name's.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_name_started_at_id", "runs", ["name", "started_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_runs_name_started_at_id", "runs")
