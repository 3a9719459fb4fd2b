"""An opened RAG index: search (dense, BM25, hybrid, filtered) and incremental updates.

`Index.update(documents)` brings the index to exactly `documents`: a document whose digest
is unchanged is left alone, a changed or missing one is tombstoned at once (its chunks are
unreachable by every path from that moment), and new chunks reuse the stored vector of any
chunk with the same text, so only text never seen before is embedded. `compact()` then
removes the tombstoned rows, after which the index answers as one built fresh.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgeml.rag._indexfile import IndexFile
from forgeml.rag.chunking import ChunkerConfig, chunk_document
from forgeml.rag.dense import DenseConfig, DenseIndex
from forgeml.rag.embeddings import Embedder
from forgeml.rag.sources import Document
from forgeml.rag.types import Chunk, Hit

_QUERY_CACHE = 256
_BASE_FIELDS = frozenset({"source", "section", "format"})


@dataclass(frozen=True)
class UpdateStats:
    """What one update did."""

    documents_added: int = 0
    documents_changed: int = 0
    documents_removed: int = 0
    chunks_added: int = 0
    chunks_tombstoned: int = 0
    embedded: int = 0
    reused: int = 0


class Index:
    """A RAG index over one SQLite file, with its dense index in memory."""

    def __init__(self, file: IndexFile, embedder: Embedder) -> None:
        self.file = file
        self.embedder = embedder
        self.chunker = ChunkerConfig(**file.get_setting("chunker"))
        self.dense_config = DenseConfig(**file.get_setting("dense"))
        self.dense = self._build_dense()
        self._fields: frozenset[str] | None = None
        self._queries: OrderedDict[str, Any] = OrderedDict()

    @classmethod
    def create(
        cls, path: Path, embedder: Embedder, chunker: ChunkerConfig, dense: DenseConfig
    ) -> Index:
        """A new, empty, writable index file at `path`."""
        file = IndexFile(path, writable=True)
        file.set_setting("chunker", chunker.as_dict())
        file.set_setting("dense", dense.as_dict())
        file.set_setting("embedder", embedder.describe())
        return cls(file, embedder)

    @classmethod
    def open(cls, path: Path, embedder: Embedder, *, writable: bool = False) -> Index:
        """The index stored at `path` (read-only unless `writable`)."""
        return cls(IndexFile(path, writable=writable), embedder)

    def close(self) -> None:
        self.file.close()

    def _build_dense(self) -> DenseIndex:
        import numpy as np

        dense = DenseIndex(self.embedder.dimension, self.dense_config)
        ids, blob = self.file.live_vectors()
        vectors = np.frombuffer(blob, dtype=np.float32).reshape(len(ids), self.embedder.dimension)
        dense.add(ids, vectors)
        return dense

    @property
    def config(self) -> dict[str, Any]:
        """Chunker, dense index and embedder settings (part of the snapshot's digest)."""
        return {
            "chunker": self.chunker.as_dict(),
            "dense": self.dense_config.as_dict(),
            "embedder": self.file.get_setting("embedder"),
        }

    # updates --------------------------------------------------------------------------
    def update(self, documents: Sequence[Document]) -> UpdateStats:
        """Make the index hold exactly `documents` (see the module's docstring)."""
        current = self.file.documents()
        incoming = {document.source: document for document in documents}
        removed = [source for source in current if source not in incoming]
        changed = [d for d in incoming.values() if current.get(d.source) != d.digest]
        tombstoned = 0
        for source in [*removed, *(d.source for d in changed if d.source in current)]:
            tombstoned += len(self.file.tombstone(source))
        chunks = [c for d in changed for c in chunk_document(d, self.embedder, self.chunker)]
        vectors, embedded, reused = self._vectors(chunks)
        rowids = self.file.add_chunks(chunks, vectors)
        for document in changed:
            self.file.add_document(document.source, document.digest, document.format)
        self.dense.add(rowids, vectors)
        self._fields = None
        return UpdateStats(
            documents_added=sum(d.source not in current for d in changed),
            documents_changed=sum(d.source in current for d in changed),
            documents_removed=len(removed),
            chunks_added=len(chunks),
            chunks_tombstoned=tombstoned,
            embedded=embedded,
            reused=reused,
        )

    def _vectors(self, chunks: Sequence[Chunk]) -> tuple[Any, int, int]:
        """Vectors for `chunks`: stored ones reused by content hash, the rest embedded once."""
        import numpy as np

        known = self.file.vectors_for(chunk.content_hash for chunk in chunks)
        vectors = {h: np.frombuffer(blob, dtype=np.float32) for h, blob in known.items()}
        reused = sum(chunk.content_hash in vectors for chunk in chunks)
        fresh = {c.content_hash: c.text for c in chunks if c.content_hash not in vectors}
        embedded = self.embedder.embed(list(fresh.values()))
        vectors.update(zip(fresh, embedded, strict=True))
        rows = [vectors[chunk.content_hash] for chunk in chunks]
        matrix = np.stack(rows) if rows else np.zeros((0, self.embedder.dimension), np.float32)
        return np.ascontiguousarray(matrix, dtype=np.float32), len(fresh), reused

    def query_vector(self, query: str) -> Any:
        """The query's embedding; the last few are kept, so a repeated query embeds once."""
        vector = self._queries.pop(query, None)
        if vector is None:
            vector = self.embedder.embed([query])[0]
        self._queries[query] = vector
        while len(self._queries) > _QUERY_CACHE:
            self._queries.popitem(last=False)
        return vector

    def compact(self) -> int:
        """Remove tombstoned chunks for good and rebuild the dense index; returns how many."""
        removed = self.file.compact()
        self.dense = self._build_dense()
        return removed

    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        filters: Mapping[str, Any] | None = None,
        weight: float | None = None,
    ) -> list[Hit]:
        """The `k` best chunks for `query`; see `forgeml.rag.search.search`."""
        from forgeml.rag.search import search

        return search(self, query, k, mode, filters, weight)

    # reading --------------------------------------------------------------------------
    def chunks(self) -> list[Chunk]:
        """Every live chunk, by source and position."""
        return self.file.live_chunks()

    def digest(self) -> str:
        """sha256 over the live chunks (ids and metadata) and the config."""
        digest = hashlib.sha256(json.dumps(self.config, sort_keys=True).encode())
        for chunk in sorted(self.chunks(), key=lambda c: c.chunk_id):
            digest.update(
                f"\n{chunk.chunk_id} {json.dumps(chunk.metadata, sort_keys=True)}".encode()
            )
        return digest.hexdigest()

    def fields(self) -> frozenset[str]:
        """The metadata fields a filter may name."""
        if self._fields is None:
            rows = self.file.db.execute(
                "SELECT DISTINCT key FROM chunks, json_each(chunks.metadata) WHERE deleted = 0"
            )
            self._fields = _BASE_FIELDS | {key for (key,) in rows}
        return self._fields
