from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from forgeml.core.errors import MissingColumnError, UsageError
from forgeml.rag.chunking import ChunkerConfig
from forgeml.rag.dense import DenseConfig
from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.index import Index
from forgeml.rag.sources import Document, load_source
from forgeml.rag.types import SEARCH_MODES
from tests.rag.conftest import write_stdlib_docs

CHUNKER = ChunkerConfig(64, 8)


def _index(path: Path, embedder: MiniLMEmbedder) -> Index:
    return Index.create(path, embedder, CHUNKER, DenseConfig())


def _doc(source: str, text: str) -> Document:
    return Document(source, text, hashlib.sha256(text.encode()).hexdigest(), "md")


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> list[Document]:
    folder = write_stdlib_docs(tmp_path_factory.mktemp("docs"))
    return list(load_source(str(folder)).documents)


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, embedder: MiniLMEmbedder, docs: list[Document]
) -> Path:
    """An index of the stdlib docs, built once; tests open copies of it."""
    path = tmp_path_factory.mktemp("built") / "index.sqlite"
    index = _index(path, embedder)
    index.update(docs)
    index.close()
    return path


def _copy(built: Path, tmp_path: Path, embedder: MiniLMEmbedder) -> Index:
    path = tmp_path / "copy.sqlite"
    shutil.copyfile(built, path)
    return Index.open(path, embedder, writable=True)


def test_each_mode_finds_the_module_a_query_is_about(
    tmp_path: Path, embedder: MiniLMEmbedder, built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    for mode in SEARCH_MODES:
        hits = index.search("heap queue algorithm, a priority queue", 3, mode)
        assert len(hits) == 3
        assert hits[0].source.endswith("heapq.md"), (mode, hits[0])
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    tokens = index.search("split a string with shell-like syntax", 1, "hybrid", weight=0.5)
    assert tokens[0].source.endswith("shlex.md")


def test_an_unchanged_corpus_is_never_embedded_again(
    tmp_path: Path, embedder: MiniLMEmbedder, docs: list[Document], built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    before = embedder.embedded
    again = index.update(docs)
    assert embedder.embedded == before
    assert (again.embedded, again.chunks_added, again.chunks_tombstoned) == (0, 0, 0)


def test_an_edit_embeds_only_the_new_text(
    tmp_path: Path, embedder: MiniLMEmbedder, docs: list[Document], built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    target = docs[0]
    edited = _doc(target.source, "A new first paragraph.\n\n" + target.text)
    before = embedder.embedded
    stats = index.update([edited, *docs[1:]])
    assert stats.documents_changed == 1
    assert 0 < stats.embedded == embedder.embedded - before < stats.chunks_added
    assert stats.reused > 0


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_deleted_source_is_unreachable_at_once_by_every_path(
    tmp_path: Path, embedder: MiniLMEmbedder, docs: list[Document], built: Path, kind: str
) -> None:
    copy = _copy(built, tmp_path, embedder)
    copy.file.set_setting("dense", DenseConfig(kind).as_dict())
    copy.close()
    index = Index.open(copy.file.path, embedder, writable=True)
    assert index.dense_config.kind == kind
    gone = next(d for d in docs if d.source.endswith("heapq.md"))
    query = "heap queue algorithm, a priority queue"
    stats = index.update([d for d in docs if d is not gone])
    assert stats.documents_removed == 1
    assert index.file.tombstoned() == stats.chunks_tombstoned > 0
    for mode in SEARCH_MODES:
        for filters in (None, {"source": gone.source}, {"format": "md"}):
            hits = index.search(query, 100, mode, filters)
            assert all(h.source != gone.source for h in hits), (mode, filters)
    assert index.compact() == stats.chunks_tombstoned
    assert index.file.tombstoned() == 0


def test_filters_keep_only_matching_chunks(
    tmp_path: Path, embedder: MiniLMEmbedder, docs: list[Document], built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    source = next(d.source for d in docs if d.source.endswith("json.md"))
    for mode in SEARCH_MODES:
        hits = index.search("parse a document", 5, mode, {"source": source})
        assert hits and all(h.source == source for h in hits)
        section = index.search("parse a document", 5, mode, {"section": "json > loads"})
        assert section and all(h.metadata["section"] == "json > loads" for h in section)


def test_a_filter_on_an_unknown_field_is_one_sentence(
    tmp_path: Path, embedder: MiniLMEmbedder, docs: list[Document], built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    with pytest.raises(MissingColumnError, match=r"^The index has no field 'author' to filter on"):
        index.search("x", 3, "bm25", {"author": "guido"})


@pytest.mark.parametrize(
    ("k", "mode", "weight", "match"),
    [
        (0, "hybrid", None, "k must be"),
        (3, "fuzzy", None, "Unknown search mode"),
        (3, "hybrid", 2.0, "weight"),
    ],
)
def test_bad_search_arguments_are_one_sentence(
    tmp_path: Path, embedder: MiniLMEmbedder, k: int, mode: str, weight: float | None, match: str
) -> None:
    index = _index(tmp_path / "i.sqlite", embedder)
    with pytest.raises(UsageError, match=match):
        index.search("x", k, mode, None, weight)


def test_hnsw_finds_what_exact_search_finds(
    tmp_path: Path, embedder: MiniLMEmbedder, built: Path
) -> None:
    exact = _copy(built, tmp_path, embedder)
    exact.file.set_setting("dense", DenseConfig("hnsw", m=16, ef_search=64).as_dict())
    approximate = Index.open(exact.file.path, embedder)
    assert approximate.dense_config.kind == "hnsw"
    queries = ("heap queue", "CSV reader", "wrap text to a width", "JSON decoder")
    found = 0
    for query in queries:
        truth = {h.chunk_id for h in exact.search(query, 10, "dense")}
        found += len(truth & {h.chunk_id for h in approximate.search(query, 10, "dense")})
    assert found / (10 * len(queries)) >= 0.95


def test_a_saved_index_opens_read_only_and_answers_the_same(
    tmp_path: Path, embedder: MiniLMEmbedder, docs: list[Document], built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    path = index.file.path
    expected = index.search("sorted list insertion", 5)
    digest = index.digest()
    index.close()
    reopened = Index.open(path, embedder)
    assert reopened.search("sorted list insertion", 5) == expected
    assert reopened.digest() == digest


def test_a_source_edited_back_to_its_old_text_is_indexed_again(
    tmp_path: Path, embedder: MiniLMEmbedder, docs: list[Document], built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    original = docs[0]
    edited = _doc(original.source, original.text.replace("\n\n", "\n\nEdited.\n\n", 1))
    index.update([edited, *docs[1:]])
    before = embedder.embedded
    stats = index.update(docs)
    assert (stats.documents_changed, stats.embedded, embedder.embedded) == (1, 0, before)
    assert all("Edited." not in h.text for h in index.search("Edited.", 50, "bm25"))
    index.compact()
    assert {c.chunk_id for c in index.chunks()} == {
        c.chunk_id for c in Index.open(built, embedder).chunks()
    }


def test_bm25_ignores_stop_words_unless_the_query_has_nothing_else(
    tmp_path: Path, embedder: MiniLMEmbedder, built: Path
) -> None:
    index = _copy(built, tmp_path, embedder)
    plain = index.search("heap queue algorithm", 5, "bm25")
    padded = index.search("what is the heap queue algorithm and how is it", 5, "bm25")
    assert [h.chunk_id for h in padded] == [h.chunk_id for h in plain]
    assert index.search("the of and", 3, "bm25")  # only stop words: they are searched
