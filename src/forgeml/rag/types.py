"""The values the RAG index hands out: chunks of source text, and search hits.

A chunk's id is stable: the sha256 of its source, its position in that source and its
text, so the same text at the same place of the same source always has the same id, and
an edit anywhere gives the edited chunk a new id (the old one is then unreachable).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

SearchMode = Literal["hybrid", "dense", "bm25"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "dense", "bm25")


def content_hash(text: str) -> str:
    """sha256 of a chunk's text (what decides whether it must be embedded again)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_id_for(source: str, position: int, text: str) -> str:
    """The stable id of the chunk at `position` of `source` holding `text` (32 hex chars)."""
    key = f"{source}\x00{position}\x00{content_hash(text)}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Chunk:
    """A span of one source's text, the unit that is embedded, indexed and cited.

    Attributes:
        chunk_id: stable id (see `chunk_id_for`).
        source: the document it came from (a file path, or `dataset:NAME:column#row`).
        position: its index among the source's chunks, from 0.
        text: the chunk's text, a verbatim span of the source's extracted text.
        metadata: filterable fields: always `source`, `section` (the markdown heading path,
            `A > B`, or "") and `format`; dataset rows add their other scalar columns.
    """

    chunk_id: str
    source: str
    position: int
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return content_hash(self.text)


@dataclass(frozen=True)
class Hit:
    """One search result: a chunk and its score under the mode asked for (higher is better)."""

    chunk_id: str
    score: float
    text: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)
