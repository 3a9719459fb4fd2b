"""RAG: sources, chunking, embeddings, dense + BM25 index, fusion, citations, eval.

The retrieval API: `open_index(workspace, "NAME[@vN]")` gives an `Index` whose
`search(query, k, mode, filters, weight)` returns `Hit`s; `build_version` indexes sources
as the next immutable version.
"""

from forgeml.rag.index import Index, UpdateStats
from forgeml.rag.types import SEARCH_MODES, Chunk, Hit, SearchMode
from forgeml.rag.versions import (
    Built,
    IndexOptions,
    build_version,
    open_index,
    rebuild,
    resolve,
    versions_of,
)

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
    "open_index",
    "rebuild",
    "resolve",
    "versions_of",
]
