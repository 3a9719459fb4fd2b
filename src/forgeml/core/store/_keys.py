"""Signing keys of the install, kept in the metadata store (issue 15).

Every server of one database reads the same row, so the audit checkpoints and the session
cookies one server signs verify on the others (a team behind a load balancer) without a
file copied by hand into each FORGEML_HOME.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, String
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class InstallKeyRecord(Base):
    """One named secret key (`audit`, `session`): 64 hex digits, made once, never changed."""

    __tablename__ = "install_keys"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
    # `generated`, or the file it was moved from (an install older than the table)
    origin: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
