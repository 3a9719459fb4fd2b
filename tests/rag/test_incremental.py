"""Random add/update/delete sequences: nothing stale is reachable, compaction equals fresh."""

from __future__ import annotations

import hashlib
import inspect
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forgeml.rag.chunking import ChunkerConfig, chunk_document
from forgeml.rag.dense import DenseConfig
from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.index import Index
from forgeml.rag.sources import Document
from forgeml.rag.types import SEARCH_MODES

CHUNKER = ChunkerConfig(24, 4)
# first paragraphs of real docstrings: the pool every generated document draws from
POOL = [
    (inspect.getdoc(obj) or "").split("\n\n")[0]
    for obj in (str.split, str.join, list.sort, dict.get, sorted, zip, enumerate, Path.glob)
]
NAMES = ("a.md", "b.md", "c.md")

operations = st.lists(
    st.tuples(
        st.sampled_from(NAMES),
        st.none() | st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=4,
)


def _document(name: str, paragraphs: list[int]) -> Document:
    text = f"# {name}\n\n" + "\n\n".join(POOL[p] for p in paragraphs)
    return Document(name, text, hashlib.sha256(text.encode()).hexdigest(), "md")


def _answers(index: Index, queries: list[str]) -> list[list[tuple[str, float]]]:
    answers = []
    for query in queries:
        for mode in SEARCH_MODES:
            hits = index.search(query, 8, mode)
            answers.append([(h.chunk_id, round(h.score, 4)) for h in hits])
    return answers


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=operations)
def test_random_updates_leave_nothing_stale_and_compact_to_a_fresh_build(
    embedder: MiniLMEmbedder, steps: list[tuple[str, list[int] | None]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        index = Index.create(Path(folder) / "i.sqlite", embedder, CHUNKER, DenseConfig())
        corpus: dict[str, Document] = {}
        for name, paragraphs in steps:
            if paragraphs is None:
                corpus.pop(name, None)
            else:
                corpus[name] = _document(name, paragraphs)
            index.update(list(corpus.values()))
            live = {
                c.chunk_id for d in corpus.values() for c in chunk_document(d, embedder, CHUNKER)
            }
            assert {c.chunk_id for c in index.chunks()} == live
            for mode in SEARCH_MODES:
                for filters in (None, {"source": name}, {"section": name}):
                    hits = index.search(POOL[0] + " " + name, 50, mode, filters)
                    assert {h.chunk_id for h in hits} <= live, (mode, filters)
        index.compact()
        fresh = Index.create(Path(folder) / "fresh.sqlite", embedder, CHUNKER, DenseConfig())
        fresh.update(list(corpus.values()))
        assert index.digest() == fresh.digest()
        queries = [POOL[1], "sort a list in place", "a.md"]
        assert _answers(index, queries) == _answers(fresh, queries)
        index.close()
        fresh.close()
