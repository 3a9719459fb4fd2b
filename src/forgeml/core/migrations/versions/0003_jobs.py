"""Scheduler: queues, jobs, job attempts and job events.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "queues",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("weight", sa.Integer, nullable=False),
        sa.Column("capability", sa.JSON, nullable=True),
        sa.Column("reclaimable", sa.Boolean, nullable=False),
        sa.Column("budget", sa.Float, nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("queue", sa.String(128), sa.ForeignKey("queues.name"), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("executor", sa.String(32), nullable=False),
        sa.Column("model_name", sa.String(128), nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", _TS, nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("submitted_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
    )
    for column in ("name", "queue", "owner", "state", "model_name"):
        op.create_index(f"ix_jobs_{column}", "jobs", [column])
    op.create_table(
        "job_attempts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("executor", sa.String(32), nullable=False),
        sa.Column("external_id", sa.String(512), nullable=True),
        sa.Column("nodes", sa.JSON, nullable=False),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("ended_at", _TS, nullable=True),
        sa.Column("heartbeat_at", _TS, nullable=False),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("log_path", sa.String(1024), nullable=True),
        sa.Column("log_digest", sa.String(64), nullable=True),
        sa.Column("cpu_seconds", sa.Float, nullable=False),
        sa.Column("gpu_seconds", sa.Float, nullable=False),
        sa.Column("memory_gb_seconds", sa.Float, nullable=False),
        sa.Column("peak_memory_gb", sa.Float, nullable=False),
        sa.Column("wall_seconds", sa.Float, nullable=False),
        sa.Column("cost", sa.Float, nullable=False),
        sa.UniqueConstraint("job_id", "number"),
    )
    op.create_index("ix_job_attempts_job_id", "job_attempts", ["job_id"])
    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=True),
        sa.Column("at", _TS, nullable=False),
        sa.Column("from_state", sa.String(16), nullable=True),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
    )
    op.create_index("ix_job_events_job_id", "job_events", ["job_id"])


def downgrade() -> None:
    op.drop_table("job_events")
    op.drop_table("job_attempts")
    op.drop_table("jobs")
    op.drop_table("queues")
