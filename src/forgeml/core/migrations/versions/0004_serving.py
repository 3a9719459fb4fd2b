"""Serving: deployments, their revisions and replicas, API keys and key usage.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "deployments",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_table(
        "deployment_revisions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "deployment_id",
            sa.String(32),
            sa.ForeignKey("deployments.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.UniqueConstraint("deployment_id", "revision"),
    )
    op.create_table(
        "deployment_replicas",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "deployment_id",
            sa.String(32),
            sa.ForeignKey("deployments.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("model_ref", sa.String(256), nullable=False),
        sa.Column("host", sa.String(256), nullable=False),
        sa.Column("port", sa.Integer, nullable=False),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("checked_at", _TS, nullable=True),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("prefix", sa.String(32), nullable=False, unique=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("salt", sa.String(64), nullable=False),
        sa.Column("secret_hash", sa.String(128), nullable=False),
        sa.Column("scopes", sa.JSON, nullable=False),
        sa.Column("rate_per_s", sa.Float, nullable=True),
        sa.Column("burst", sa.Integer, nullable=True),
        sa.Column("daily_quota", sa.Integer, nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("revoked_at", _TS, nullable=True),
    )
    op.create_table(
        "key_usage",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "key_id", sa.String(32), sa.ForeignKey("api_keys.id"), nullable=False, index=True
        ),
        sa.Column("deployment", sa.String(128), nullable=False, index=True),
        sa.Column("period", sa.String(16), nullable=False, index=True),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("errors", sa.Integer, nullable=False),
        sa.Column("rejected", sa.Integer, nullable=False),
        sa.Column("latency_ms_total", sa.Float, nullable=False),
        sa.UniqueConstraint("key_id", "deployment", "period"),
    )


def downgrade() -> None:
    for table in ("key_usage", "api_keys", "deployment_replicas", "deployment_revisions"):
        op.drop_table(table)
    op.drop_table("deployments")
