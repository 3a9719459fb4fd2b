"""BM25 through bm25s' sparse index: bm25s' own scores, nothing stale, filters, snapshots."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import bm25s
import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.core.workspace import Workspace
from forgeml.rag import IndexOptions, build_version, open_index, rebuild
from forgeml.rag.chunking import ChunkerConfig
from forgeml.rag.dense import DenseConfig
from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.index import Index
from forgeml.rag.sources import Document, load_source
from forgeml.rag.sparse import SparseIndex
from tests.rag.conftest import write_stdlib_docs

CHUNKER = ChunkerConfig(64, 8)
QUERY = "insert an item into a sorted list"


def _doc(source: str, text: str) -> Document:
    return Document(source, text, hashlib.sha256(text.encode()).hexdigest(), "md")


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> list[Document]:
    folder = write_stdlib_docs(tmp_path_factory.mktemp("docs"), ("bisect", "heapq", "json"))
    return list(load_source(str(folder)).documents)


@pytest.fixture(scope="module")
def compacted(
    tmp_path_factory: pytest.TempPathFactory, embedder: MiniLMEmbedder, docs: list[Document]
) -> Path:
    """A compacted index of three stdlib modules' docs (a snapshot's file), built once."""
    path = tmp_path_factory.mktemp("compacted") / "index.sqlite"
    index = Index.create(path, embedder, CHUNKER, DenseConfig())
    index.update(docs)
    index.compact()
    index.close()
    return path


def _writable(compacted: Path, tmp_path: Path, embedder: MiniLMEmbedder) -> Index:
    path = tmp_path / "copy.sqlite"
    shutil.copyfile(compacted, path)
    return Index.open(path, embedder, writable=True)


def test_scores_are_bm25s_own(embedder: MiniLMEmbedder, compacted: Path) -> None:
    index = Index.open(compacted, embedder)
    rowids, texts = index.file.live_texts()
    reference = bm25s.BM25()
    reference.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
    words = bm25s.tokenize([QUERY], stopwords="en", return_ids=False, show_progress=False)
    _, best = reference.retrieve([words[0]], k=5, show_progress=False)
    every = reference.get_scores(words[0])
    ours = index.sparse().search(QUERY, 5)
    assert [round(score, 5) for _, score in ours] == [round(float(s), 5) for s in best[0]]
    # each row's own score (bm25s may order equal scores otherwise)
    assert all(every[rowids.index(rowid)] == pytest.approx(score) for rowid, score in ours)
    index.close()


def test_a_snapshot_loads_its_stored_bm25_and_answers_as_the_built_index(
    embedder: MiniLMEmbedder, compacted: Path, tmp_path: Path
) -> None:
    built = _writable(compacted, tmp_path, embedder)
    expected = {mode: built.search(QUERY, 5, mode) for mode in ("bm25", "hybrid")}
    stored = Index.open(compacted, embedder)
    assert stored._sparse is not None  # read from the file, not tokenized again
    assert set(stored.file.bm25_blobs()) == {"data", "indices", "indptr", "rowids", "vocab"}
    assert {mode: stored.search(QUERY, 5, mode) for mode in expected} == expected
    assert expected["bm25"][0].source.endswith("bisect.md")
    built.close()
    stored.close()


def test_an_update_drops_the_stored_bm25_and_nothing_stale_is_found(
    embedder: MiniLMEmbedder, compacted: Path, docs: list[Document], tmp_path: Path
) -> None:
    index = _writable(compacted, tmp_path, embedder)
    bisect, *others = docs
    assert index.search("bisection", 5, "bm25")
    edited = _doc(bisect.source, "# bisect\n\nZanzibar quokkas insert things in order.")
    index.update([edited, *others[1:]])  # bisect edited, heapq's docs deleted
    assert index.file.bm25_blobs() == {}
    live = {chunk.chunk_id for chunk in index.chunks()}
    for query in ("bisection sorted list", "heap queue priority", "zanzibar quokkas"):
        hits = index.search(query, 50, "bm25")
        assert {hit.chunk_id for hit in hits} <= live, query
        assert all("heapq" not in hit.source for hit in hits)
    assert [h.text for h in index.search("zanzibar quokkas", 3, "bm25")] == [
        "# bisect\n\nZanzibar quokkas insert things in order."
    ]
    index.compact()
    reopened = Index.open(index.file.path, embedder)
    assert reopened._sparse is not None
    assert reopened.search("zanzibar", 3, "bm25") == index.search("zanzibar", 3, "bm25")
    index.close()
    reopened.close()


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_filters_limit_bm25_to_the_matching_rows(
    embedder: MiniLMEmbedder, compacted: Path, mode: str
) -> None:
    index = Index.open(compacted, embedder)
    source = next(c.source for c in index.chunks() if c.source.endswith("json.md"))
    everything = index.search(QUERY, 500, "bm25")
    filtered = index.search(QUERY, 5, mode, {"source": source})
    assert filtered and all(hit.source == source for hit in filtered)
    if mode == "bm25":
        assert filtered == [hit for hit in everything if hit.source == source][:5]
    assert index.search(QUERY, 5, mode, {"source": "nowhere.md"}) == []
    index.close()


def test_a_damaged_stored_bm25_is_one_sentence(
    embedder: MiniLMEmbedder, compacted: Path, tmp_path: Path
) -> None:
    path = tmp_path / "damaged.sqlite"
    shutil.copyfile(compacted, path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE bm25 SET value = ? WHERE name = 'data'", (b"not an array",))
    with pytest.raises(InvalidDataError, match="BM25 arrays are damaged"):
        Index.open(path, embedder)


def test_a_corpus_without_a_word_has_an_empty_bm25() -> None:
    sparse = SparseIndex.build([1, 2], ["!", "- ?"])
    assert (sparse.size, sparse.search("anything", 3), sparse.to_blobs()) == (0, [], {})


def test_a_snapshot_stores_its_bm25_and_rebuild_still_proves_the_digest(
    workspace: Workspace, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "heapq.md").write_text("# heapq\n\nHeap queue algorithm.", encoding="utf-8")
    (folder / "bisect.md").write_text("# bisect\n\nBisection keeps lists sorted.", "utf-8")
    options = IndexOptions(chunk_tokens=64, overlap=8)
    built = build_version(workspace, "docs", [str(folder)], options, embedder)
    index = open_index(workspace, "docs", embedder)
    assert index._sparse is not None
    assert [h.source for h in index.search("bisection", 1, "bm25")] == ["corpus/bisect.md"]
    index.close()
    version, digest = rebuild(workspace, "docs", embedder)
    assert digest == version.digest == built.version.digest
