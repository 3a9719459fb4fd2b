"""RAG: sources, chunking, embeddings, dense + BM25 index, fusion, citations, eval.

The retrieval API: `open_index(workspace, "NAME[@vN]")` gives an `Index` whose
`search(query, k, mode, filters, weight)` returns `Hit`s; `build_version` indexes sources
as the next immutable version. Names load on first use, so `forgeml rag --help` (which
reads `IndexOptions`) imports neither SQLAlchemy nor torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forgeml.rag.index import Index, UpdateStats
    from forgeml.rag.options import IndexOptions
    from forgeml.rag.types import SEARCH_MODES, Chunk, Hit, SearchMode
    from forgeml.rag.versions import (
        Built,
        build_version,
        find_index,
        open_index,
        rebuild,
        resolve,
        resolve_own,
        versions_of,
    )

_HOMES = {
    "SEARCH_MODES": "forgeml.rag.types",
    "Built": "forgeml.rag.versions",
    "Chunk": "forgeml.rag.types",
    "Hit": "forgeml.rag.types",
    "Index": "forgeml.rag.index",
    "IndexOptions": "forgeml.rag.options",
    "SearchMode": "forgeml.rag.types",
    "UpdateStats": "forgeml.rag.index",
    "build_version": "forgeml.rag.versions",
    "find_index": "forgeml.rag.versions",
    "open_index": "forgeml.rag.versions",
    "rebuild": "forgeml.rag.versions",
    "resolve": "forgeml.rag.versions",
    "resolve_own": "forgeml.rag.versions",
    "versions_of": "forgeml.rag.versions",
}
__all__ = [
    "SEARCH_MODES",
    "Built",
    "Chunk",
    "Hit",
    "Index",
    "IndexOptions",
    "SearchMode",
    "UpdateStats",
    "build_version",
    "find_index",
    "open_index",
    "rebuild",
    "resolve",
    "resolve_own",
    "versions_of",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'forgeml.rag' has no attribute '{name}'")
    return getattr(import_module(_HOMES[name]), name)
