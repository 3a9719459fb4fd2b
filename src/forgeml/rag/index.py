"""An opened RAG index: search (dense, BM25, hybrid, filtered) and incremental updates.

`Index.update(documents)` brings the index to exactly `documents`: a document whose digest
is unchanged is left alone, a changed or missing one is tombstoned at once (its chunks are
unreachable by every path from that moment), and new chunks reuse the stored vector of any
chunk with the same text, so only text never seen before is embedded. `compact()` then
removes the tombstoned rows, after which the index answers as one built fresh.

What a search reads on every query is kept in memory per opened index, and dropped by any
update or compaction: the live row ids, each filterable field's rows by value, and the
BM25 index (`rag.sparse`), which a compaction also stores in the file, so a snapshot (a
compacted file, opened read-only) loads it instead of tokenizing its chunks again.
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
from forgeml.rag.sparse import SparseIndex
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
        import numpy as np

        self.file = file
        self.embedder = embedder
        self.chunker = ChunkerConfig(**file.get_setting("chunker"))
        self.dense_config = DenseConfig(**file.get_setting("dense"))
        self.dense = self._build_dense()
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._fields: frozenset[str] | None = None
        self._sparse: SparseIndex | None = None
        self._live: Any = None
        self._values: dict[str, dict[str | None, Any]] = {}
        if not file.writable:
            blobs = file.bm25_blobs()
            stored = SparseIndex.from_blobs(blobs) if blobs else None
            # it covers exactly the live rows, as compact() stored it, or it is not used
            if stored is not None and np.array_equal(stored.rowids, self.live_ids()):
                self._sparse = stored

    def _forget(self) -> None:
        """Drop what was kept of the rows (after they changed)."""
        self._fields = None
        self._sparse = None
        self._live = None
        self._values = {}

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
        self.file.add_documents([(d.source, d.digest, d.format) for d in changed])
        self.dense.add(rowids, vectors)
        if tombstoned or rowids:
            self.file.drop_bm25()
            self._forget()
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
        """Remove tombstoned chunks for good, rebuild the dense index, and build and store
        the BM25 index; returns how many chunks were removed."""
        removed = self.file.compact()
        self.dense = self._build_dense()
        self._forget()
        self.file.set_bm25_blobs(self.sparse().to_blobs())
        return removed

    def sparse(self) -> SparseIndex:
        """The BM25 index over the live chunks: the file's own when it stores one that
        covers them (a compacted snapshot), else built from them once."""
        if self._sparse is None:
            self._sparse = SparseIndex.build(*self.file.live_texts())
        return self._sparse

    def live_ids(self) -> Any:
        """Every live row id, ascending (an int64 array)."""
        import numpy as np

        if self._live is None:
            self._live = np.asarray(self.file.live_ids(), dtype=np.int64)
        return self._live

    def rows_where(self, field: str, value: str) -> Any:
        """The live row ids whose metadata `field`, as text, is `value` (an ascending
        int64 array); each field is read once, then answered from memory."""
        import numpy as np

        if field not in self._values:
            grouped: dict[str | None, list[int]] = {}
            for rowid, text in self.file.field_values(field):
                grouped.setdefault(text, []).append(int(rowid))
            self._values[field] = {v: np.asarray(r, dtype=np.int64) for v, r in grouped.items()}
        return self._values[field].get(value, np.zeros(0, dtype=np.int64))

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
