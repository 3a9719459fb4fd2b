"""One index's SQLite file: chunks with their vectors, documents, settings, BM25 arrays.

A compacted file also holds its BM25 index (`rag.sparse`) in the `bm25` table, as plain
arrays; any update drops them, since they covered the rows before it. (Files written
before held an FTS5 table instead; a writable open drops it, nothing reads it.)

Removing a document is two steps. The tombstone is immediate: its chunks are marked
deleted, the BM25 index is built again over the live rows only, and the dense search
excludes marked rows through a FAISS ID selector, so no path (dense, BM25, hybrid,
filters) can reach them. Compaction later deletes the marked rows, rebuilds the dense
index from the live vectors and stores the BM25 index, after which the file holds what a
fresh build would.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.rag.types import Chunk

if TYPE_CHECKING:
    import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(content_hash);
DROP TABLE IF EXISTS fts;
CREATE TABLE IF NOT EXISTS documents (
    source TEXT PRIMARY KEY, digest TEXT NOT NULL, format TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bm25 (name TEXT PRIMARY KEY, value BLOB NOT NULL);
"""


class IndexFile:
    """An opened index file (read-only for a snapshot, writable for a working copy)."""

    def __init__(self, path: Path, *, writable: bool = False) -> None:
        self.path = path
        self.writable = writable
        if writable:
            self.db = sqlite3.connect(path, isolation_level=None)
            self.db.executescript(_SCHEMA)
        else:
            # a server opens a snapshot once and searches it from its worker threads, one
            # at a time (`rag.serving` holds a lock); the file itself never changes
            self.db = sqlite3.connect(
                f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False
            )
        self._live: int | None = None

    def close(self) -> None:
        self.db.close()

    # settings -------------------------------------------------------------------------
    def get_setting(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_setting(self, key: str, value: Any) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO settings VALUES (?, ?)",
            (key, json.dumps(value, sort_keys=True)),
        )

    # documents ------------------------------------------------------------------------
    def documents(self) -> dict[str, str]:
        """Every indexed document's source and digest."""
        return dict(self.db.execute("SELECT source, digest FROM documents"))

    def add_documents(self, documents: Sequence[tuple[str, str, str]]) -> None:
        """Record (source, digest, format) rows, in one transaction: one by one, each its
        own, 100k documents spent minutes waiting on the disk (benchmarks/rag_scale.py)."""
        self.db.execute("BEGIN")
        self.db.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?, ?)", documents)
        self.db.execute("COMMIT")

    def tombstone(self, source: str) -> list[int]:
        """Make every chunk of `source` unreachable at once; returns their row ids."""
        rows = [
            r
            for (r,) in self.db.execute(
                "SELECT rowid FROM chunks WHERE source = ? AND deleted = 0", (source,)
            )
        ]
        self.db.execute("BEGIN")
        self.db.execute("UPDATE chunks SET deleted = 1 WHERE source = ?", (source,))
        self.db.execute("DELETE FROM documents WHERE source = ?", (source,))
        self.db.execute("COMMIT")
        return rows

    # chunks ---------------------------------------------------------------------------
    def add_chunks(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> list[int]:
        """Insert chunks with their vectors (one transaction); returns their row ids."""
        rowids = []
        self.db.execute("BEGIN")
        for chunk, vector in zip(chunks, vectors, strict=True):
            # a source edited back to earlier text brings back a tombstoned chunk's id; that
            # row is unreachable already, so it goes now (its vector was read for reuse)
            self.db.execute(
                "DELETE FROM chunks WHERE chunk_id = ? AND deleted = 1", (chunk.chunk_id,)
            )
            cursor = self.db.execute(
                "INSERT INTO chunks (chunk_id, source, position, text, metadata, content_hash,"
                " vector) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    chunk.chunk_id,
                    chunk.source,
                    chunk.position,
                    chunk.text,
                    json.dumps(chunk.metadata, sort_keys=True),
                    chunk.content_hash,
                    vector.tobytes(),
                ),
            )
            rowids.append(int(cursor.lastrowid or 0))
        self.db.execute("COMMIT")
        return rowids

    def vectors_for(self, hashes: Iterable[str]) -> dict[str, bytes]:
        """Stored vectors by content hash (live or tombstoned: the text is the same)."""
        wanted = list(set(hashes))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(
                self.db.execute(
                    f"SELECT content_hash, vector FROM chunks WHERE content_hash IN ({marks})", part
                )
            )
        return found

    def live_vectors(self) -> tuple[list[int], bytes]:
        """Row ids and concatenated float32 vectors of every live chunk, by row id."""
        rows = self.db.execute("SELECT rowid, vector FROM chunks WHERE deleted = 0 ORDER BY rowid")
        ids, blobs = [], []
        for rowid, blob in rows:
            ids.append(int(rowid))
            blobs.append(blob)
        return ids, b"".join(blobs)

    def live_ids(self) -> list[int]:
        """Row ids of every live chunk, ascending."""
        rows = self.db.execute("SELECT rowid FROM chunks WHERE deleted = 0 ORDER BY rowid")
        return [int(rowid) for (rowid,) in rows]

    def live_texts(self) -> tuple[list[int], list[str]]:
        """Row ids and texts of every live chunk, by row id."""
        rows = self.db.execute("SELECT rowid, text FROM chunks WHERE deleted = 0 ORDER BY rowid")
        ids, texts = [], []
        for rowid, text in rows:
            ids.append(int(rowid))
            texts.append(text)
        return ids, texts

    def field_values(self, key: str) -> list[tuple[int, str | None]]:
        """Every live row's id and its metadata field `key` as text (None where it has none)."""
        return list(
            self.db.execute(
                "SELECT rowid, CAST(json_extract(metadata, ?) AS TEXT) FROM chunks "
                "WHERE deleted = 0 ORDER BY rowid",
                (f'$."{key}"',),
            )
        )

    # the stored BM25 index --------------------------------------------------------------
    def bm25_blobs(self) -> dict[str, bytes]:
        """The stored BM25 index's blobs by name (none in a file written before them)."""
        try:
            return dict(self.db.execute("SELECT name, value FROM bm25"))
        except sqlite3.OperationalError:  # no such table: an older snapshot, read-only
            return {}

    def set_bm25_blobs(self, blobs: dict[str, bytes]) -> None:
        """Store `blobs` as the BM25 index, replacing any before (one transaction)."""
        self.db.execute("BEGIN")
        self.db.execute("DELETE FROM bm25")
        self.db.executemany("INSERT INTO bm25 VALUES (?, ?)", blobs.items())
        self.db.execute("COMMIT")

    def drop_bm25(self) -> None:
        self.db.execute("DELETE FROM bm25")

    def tombstoned(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM chunks WHERE deleted = 1").fetchone()[0])

    def live_count(self) -> int:
        if self._live is None or self.writable:
            row = self.db.execute("SELECT count(*) FROM chunks WHERE deleted = 0").fetchone()
            self._live = int(row[0])
        return self._live  # a read-only snapshot never changes: counted once

    def compact(self) -> int:
        """Delete tombstoned rows for good; returns how many."""
        removed = self.db.execute("DELETE FROM chunks WHERE deleted = 1").rowcount
        self.db.execute("VACUUM")
        return int(removed)

    def live_chunks(self) -> list[Chunk]:
        """Every live chunk, by source and position."""
        rows = self.db.execute(
            "SELECT chunk_id, source, position, text, metadata FROM chunks WHERE deleted = 0 "
            "ORDER BY source, position"
        )
        return [Chunk(c, s, p, t, json.loads(m)) for c, s, p, t, m in rows]

    def rows(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str, dict[str, Any]]]:
        """chunk id, text, source and metadata of live rows, by row id."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        found = self.db.execute(
            f"SELECT rowid, chunk_id, text, source, metadata FROM chunks "
            f"WHERE deleted = 0 AND rowid IN ({marks})",
            list(rowids),
        )
        return {int(r): (c, t, s, json.loads(m)) for r, c, t, s, m in found}
