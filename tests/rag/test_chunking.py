from __future__ import annotations

import inspect
import itertools
import json

import pytest

from forgeml.core.errors import UsageError
from forgeml.rag.chunking import ChunkerConfig, chunk_document
from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.sources import Document
from forgeml.rag.types import chunk_id_for
from tests.rag.conftest import module_markdown


def _doc(text: str, fmt: str = "md") -> Document:
    return Document("doc.md", text, "digest", fmt)


def test_chunks_are_verbatim_spans_within_the_token_budget(embedder: MiniLMEmbedder) -> None:
    text = module_markdown(json)
    chunks = chunk_document(_doc(text), embedder, ChunkerConfig(64, 8))
    assert len(chunks) > 5
    for position, chunk in enumerate(chunks):
        assert chunk.text in text
        assert chunk.position == position
        assert len(embedder.offsets(chunk.text)) <= 64
        assert chunk.chunk_id == chunk_id_for("doc.md", position, chunk.text)


def test_consecutive_chunks_of_a_section_overlap(embedder: MiniLMEmbedder) -> None:
    text = inspect.getdoc(json) or ""
    chunks = chunk_document(_doc(text, "txt"), embedder, ChunkerConfig(48, 8))
    position = 0
    for before, after in itertools.pairwise(chunks):
        start = text.index(before.text, position)
        following = text.index(after.text, start + 1)
        assert following < start + len(before.text)
        position = start


def test_headings_start_chunks_and_become_the_section_path(embedder: MiniLMEmbedder) -> None:
    text = (
        "# Guide\n\nIntro text.\n\n## Install\n\nRun pip.\n\n"
        "### Offline\n\nUse a wheel.\n\n## Use\n\nCall it."
    )
    chunks = chunk_document(_doc(text), embedder, ChunkerConfig(256, 32))
    sections = [c.metadata["section"] for c in chunks]
    assert sections == ["Guide", "Guide > Install", "Guide > Install > Offline", "Guide > Use"]
    assert chunks[1].text.startswith("## Install")
    assert chunks[0].metadata["source"] == "doc.md"
    assert chunks[0].metadata["format"] == "md"


def test_a_heading_with_no_text_of_its_own_joins_the_next_section(
    embedder: MiniLMEmbedder,
) -> None:
    text = "# csv\n\n## csv.reader\n\nReturn a reader.\n\n## csv.writer\n\nReturn a writer.\n"
    chunks = chunk_document(_doc(text), embedder, ChunkerConfig(256, 32))
    assert [c.metadata["section"] for c in chunks] == ["csv > csv.reader", "csv > csv.writer"]
    assert chunks[0].text.startswith("# csv\n\n## csv.reader")


def test_a_heading_inside_a_code_fence_is_code(embedder: MiniLMEmbedder) -> None:
    text = "# Top\n\n```python\n# not a heading\nx = 1\n```\n"
    chunks = chunk_document(_doc(text), embedder)
    assert [c.metadata["section"] for c in chunks] == ["Top"]


def test_plain_text_has_no_sections(embedder: MiniLMEmbedder) -> None:
    chunks = chunk_document(_doc("# a comment\n\nbody", "txt"), embedder)
    assert [c.metadata["section"] for c in chunks] == [""]


def test_a_code_block_that_fits_is_never_split(embedder: MiniLMEmbedder) -> None:
    code = "```python\n" + inspect.getsource(json.dumps).split('"""')[0] + "```"
    prose = " ".join(["Words of prose that fill the window before the code block."] * 6)
    text = f"# Code\n\n{prose}\n\n{code}\n\nAfter the block."
    assert len(embedder.offsets(code)) <= 96
    chunks = chunk_document(_doc(text), embedder, ChunkerConfig(96, 8))
    assert any(code in chunk.text for chunk in chunks)


def test_ids_are_stable_and_change_with_the_text(embedder: MiniLMEmbedder) -> None:
    text = module_markdown(json)
    first = chunk_document(_doc(text), embedder, ChunkerConfig(64, 8))
    again = chunk_document(_doc(text), embedder, ChunkerConfig(64, 8))
    edited = chunk_document(_doc(text.replace("JSON", "Json", 1)), embedder, ChunkerConfig(64, 8))
    assert [c.chunk_id for c in first] == [c.chunk_id for c in again]
    assert first[0].chunk_id != edited[0].chunk_id
    assert first[-1].chunk_id == edited[-1].chunk_id


@pytest.mark.parametrize(("tokens", "overlap"), [(4, 0), (64, 33), (64, -1)])
def test_bad_chunker_settings_are_one_sentence(tokens: int, overlap: int) -> None:
    with pytest.raises(UsageError, match=r"^--(chunk-tokens|overlap) must be"):
        ChunkerConfig(tokens, overlap)
