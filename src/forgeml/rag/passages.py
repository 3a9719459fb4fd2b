"""Hits and answers as the other layers want them: `Passage`s for `rag.answer`, dicts for
`rag_search`, and the one JSON shape of an answer (`rag answer --json`, the HTTP route).

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
    from forgeml.rag.answer import Answer

__all__ = ["answer_record", "hit_record", "index_search", "passages_of"]


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


def answer_record(
    ref: str, question: str, model: str, result: Answer, passages: list[Passage]
) -> dict[str, Any]:
    """An answer as JSON-able data: its text, each citation's chunk id, source and quote,
    whether it is supported (and why not), the prompt@version and model that wrote it."""
    by_id = {passage.chunk_id: passage for passage in passages}
    return {
        "ref": ref,
        "question": question,
        "answer": result.text,
        "supported": result.supported,
        "refused_reason": result.refused_reason,
        "citations": [
            {"n": c.n, "chunk_id": c.chunk_id, "source": by_id[c.chunk_id].source, "quote": c.quote}
            for c in result.citations
        ],
        "prompt_ref": result.prompt_ref,
        "model": result.model or model,
        "usage": result.usage.__dict__,
    }


def index_search(workspace: Workspace, ref: str) -> Callable[[str, int], list[dict[str, Any]]]:
    """A `Search` (query, k -> hit records) over the index version `ref` (hybrid, RRF).

    Raises:
        NotFoundError: no such index or version (checked now, not at the first call).
        OtherProjectError: the index belongs to another project than the workspace's.
    """
    from forgeml.rag.versions import resolve_own

    with workspace.store.session() as session:
        resolve_own(session, workspace, ref)

    def search(query: str, k: int) -> list[dict[str, Any]]:
        from forgeml.rag.versions import open_index

        index = open_index(workspace, ref)
        try:
            return [hit_record(hit) for hit in index.search(query, k)]
        finally:
            index.close()

    return search
