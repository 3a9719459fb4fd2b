"""Account records: users (people and service accounts), projects, memberships with a role,
tokens (API tokens and sign-in sessions, only a hash of their secret kept), login attempts.

A user signed in through OIDC is found again by (`external_issuer`, `external_subject`),
unique together (NULLs never collide, so accounts without one do not). A membership's
`source` is `manual` (granted by a person) or `oidc` (set from the provider's groups at each
sign-in, which may take it away again); a manual grant is never overwritten by a mapping.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class UserRecord(Base):
    """A person or a service account; `password_hash` is an Argon2id hash or NULL."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("external_issuer", "external_subject"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # user (a person) or service (a service account: tokens only, no password)
    kind: Mapped[str] = mapped_column(String(16))
    email: Mapped[str | None] = mapped_column(String(320))
    password_hash: Mapped[str | None] = mapped_column(Text)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    external_issuer: Mapped[str | None] = mapped_column(String(512))
    external_subject: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProjectRecord(Base):
    """A project: the unit roles are granted in (`default` unless a request names one)."""

    __tablename__ = "projects"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class MembershipRecord(Base):
    """One user's role in one project."""

    __tablename__ = "memberships"

    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), primary_key=True)
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id"), primary_key=True, index=True)
    role: Mapped[str] = mapped_column(String(16))
    # manual or oidc
    source: Mapped[str] = mapped_column(String(16), default="manual")
    granted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    granted_by: Mapped[str] = mapped_column(String(128))


class TokenRecord(Base):
    """An API token or a sign-in session: `fmlt_<id>_<secret>`, of which only a SHA-256 of
    the secret is kept (the secret is 256 random bits: no slow hash is needed)."""

    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    # token (an API token) or session (a password or OIDC sign-in)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(128))
    secret_hash: Mapped[str] = mapped_column(String(64))
    # permissions the token is limited to; None: every permission of its user's roles
    scopes: Mapped[list[Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class LoginAttemptRecord(Base):
    """One password sign-in attempt: who was named, from which address, whether it worked."""

    __tablename__ = "login_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(128), index=True)
    address: Mapped[str] = mapped_column(String(64), index=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    succeeded: Mapped[bool] = mapped_column(Boolean)
