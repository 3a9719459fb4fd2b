"""Accounts: users and service accounts, projects, memberships, tokens, login attempts.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("password_hash", sa.Text, nullable=True),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("external_issuer", sa.String(512), nullable=True),
        sa.Column("external_subject", sa.String(255), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.UniqueConstraint("external_issuer", "external_subject"),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
    )
    op.create_table(
        "memberships",
        sa.Column("user_id", sa.String(32), sa.ForeignKey("users.id"), primary_key=True),
        sa.Column(
            "project_id", sa.String(32), sa.ForeignKey("projects.id"), primary_key=True, index=True
        ),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("granted_at", _TS, nullable=False),
        sa.Column("granted_by", sa.String(128), nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("user_id", sa.String(32), sa.ForeignKey("users.id"), nullable=False, index=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("scopes", sa.JSON, nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("expires_at", _TS, nullable=True),
        sa.Column("revoked_at", _TS, nullable=True),
        sa.Column("last_used_at", _TS, nullable=True),
    )
    op.create_table(
        "login_attempts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("username", sa.String(128), nullable=False, index=True),
        sa.Column("address", sa.String(64), nullable=False, index=True),
        sa.Column("at", _TS, nullable=False, index=True),
        sa.Column("succeeded", sa.Boolean, nullable=False),
    )


def downgrade() -> None:
    for table in ("login_attempts", "tokens", "memberships", "projects", "users"):
        op.drop_table(table)
