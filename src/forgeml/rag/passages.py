"""Hits as the other layers want them: `Passage`s for `rag.answer`, dicts for `rag_search`.

`index_search` gives the agents' `rag_search` tool a `Search` over an index version: each
call opens the snapshot read-only and closes it again, so tool calls running in parallel
threads never share a SQLite connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from forgeml.rag.citations import Passage
from forgeml.rag.types import Hit

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

__all__ = ["hit_record", "index_search", "passages_of"]


def passages_of(hits: Sequence[Hit]) -> list[Passage]:
    """The hits as passages, in order (the model sees the first as [1])."""
    return [Passage(chunk_id=hit.chunk_id, text=hit.text, source=hit.source) for hit in hits]


def hit_record(hit: Hit) -> dict[str, Any]:
    """One hit as JSON-able data: id, source, section, score and text."""
    return {
        "id": hit.chunk_id,
        "source": hit.source,
        "section": hit.metadata.get("section", ""),
        "score": round(hit.score, 6),
        "text": hit.text,
    }


def index_search(workspace: Workspace, ref: str) -> Callable[[str, int], list[dict[str, Any]]]:
    """A `Search` (query, k -> hit records) over the index version `ref` (hybrid, RRF).

    Raises:
        NotFoundError: no such index or version (checked now, not at the first call).
    """
    from forgeml.rag.versions import resolve

    with workspace.store.session() as session:
        resolve(session, ref)

    def search(query: str, k: int) -> list[dict[str, Any]]:
        from forgeml.rag.versions import open_index

        index = open_index(workspace, ref)
        try:
            return [hit_record(hit) for hit in index.search(query, k)]
        finally:
            index.close()

    return search
