"""Indexes for the API's run list: newest first by (started_at, id), optionally by status.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_started_at_id", "runs", ["started_at", "id"])
    op.create_index("ix_runs_status_started_at_id", "runs", ["status", "started_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_runs_status_started_at_id", "runs")
    op.drop_index("ix_runs_started_at_id", "runs")
