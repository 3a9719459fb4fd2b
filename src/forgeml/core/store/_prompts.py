"""Prompt versions and their aliases.

A `prompt_versions` row is one immutable version of a named prompt: its number, the
digest of its content, its kind (`text`: one template; `chat`: role + template messages)
and the content itself (template or messages, declared variables, examples, description,
model defaults) as JSON. `(name, digest)` is unique, so the same content is one version.
`prompt_aliases` points `NAME@ALIAS` at a version number; moving an alias updates its row.
`prompt_splits` holds a prompt's traffic split: one row per alias with its weight in
percent (the weights of a name sum to 100); a request naming neither alias nor version
draws an alias by these weights. A prompt belongs to one project (its versions' `project`,
migration 0021).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class PromptVersionRecord(Base):
    """One immutable prompt version."""

    __tablename__ = "prompt_versions"
    __table_args__ = (UniqueConstraint("name", "version"), UniqueConstraint("name", "digest"))

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    # the project its prompt belongs to (every version of a name has the same; a prompt's
    # name stays unique across every project, so its aliases and split need none)
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    version: Mapped[int] = mapped_column(Integer)
    digest: Mapped[str] = mapped_column(String(64))
    # text (one template) or chat (a list of role + template messages)
    kind: Mapped[str] = mapped_column(String(8))
    content: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    @property
    def ref(self) -> str:
        return f"{self.name}@v{self.version}"


class PromptAliasRecord(Base):
    """`NAME@ALIAS` -> a version number of prompt NAME."""

    __tablename__ = "prompt_aliases"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    alias: Mapped[str] = mapped_column(String(128), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PromptSplitRecord(Base):
    """One alias of prompt NAME's traffic split and its weight in percent."""

    __tablename__ = "prompt_splits"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    alias: Mapped[str] = mapped_column(String(128), primary_key=True)
    weight: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
