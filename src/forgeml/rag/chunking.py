"""Chunking by tokens that respects a document's structure.

Markdown (and HTML, whose headings the extractor writes as markdown) is first cut into
sections at its headings; each chunk records its section path (`A > B`). Within a section,
windows of `chunk_tokens` tokens of the embedder's tokenizer overlap by `overlap` tokens; a
window ends at a paragraph break when one lies in its second half, and never inside a
fenced code block that fits in one window (it ends before the block instead). A chunk's
text is a verbatim span of the document's text, so a citation can quote it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from forgeml.core.errors import UsageError
from forgeml.rag.sources import Document
from forgeml.rag.types import Chunk, chunk_id_for

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_STRUCTURED = frozenset({"md", "html"})


class Tokenizer(Protocol):
    """What chunking needs of a tokenizer: each token's (start, end) characters in `text`."""

    def offsets(self, text: str) -> list[tuple[int, int]]: ...


@dataclass(frozen=True)
class ChunkerConfig:
    """How documents are cut into chunks."""

    chunk_tokens: int = 256
    overlap: int = 32

    def __post_init__(self) -> None:
        if self.chunk_tokens < 8:
            raise UsageError(f"--chunk-tokens must be at least 8, not {self.chunk_tokens}.")
        if not 0 <= self.overlap <= self.chunk_tokens // 2:
            raise UsageError(
                f"--overlap must be between 0 and half of --chunk-tokens "
                f"({self.chunk_tokens // 2}), not {self.overlap}."
            )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Section:
    start: int
    end: int
    path: str
    code: tuple[tuple[int, int], ...]  # fenced blocks, as character spans of the document


def _sections(text: str, structured: bool) -> list[_Section]:
    """Cut at headings outside code fences; record each fenced block's span."""
    cuts: list[tuple[int, str]] = [(0, "")]
    code: list[tuple[int, int]] = []
    trail: list[str] = []
    fence: str | None = None
    fence_start = position = 0
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if structured and (match := _FENCE.match(stripped)):
            marker = match.group(1)
            if fence is None:
                fence, fence_start = marker[0] * 3, position
            elif marker.startswith(fence):
                fence = None
                code.append((fence_start, position + len(stripped)))
        elif structured and fence is None and (heading := _HEADING.match(stripped)):
            level = len(heading.group(1))
            trail = [*trail[: level - 1], *[""] * max(0, level - 1 - len(trail)), heading.group(2)]
            cuts.append((position, " > ".join(part for part in trail if part)))
        position += len(line)
    bounds = [*[start for start, _ in cuts[1:]], len(text)]
    sections: list[_Section] = []
    held: int | None = None  # start of a heading with no text of its own (`# csv` then `## x`)
    for (start, path), end in zip(cuts, bounds, strict=True):
        body = text[start:end].strip()
        if not body:
            continue
        if end < len(text) and _HEADING.match(body) and "\n" not in body:
            held = start if held is None else held
            continue
        first = start if held is None else held
        held = None
        sections.append(_Section(first, end, path, tuple(c for c in code if first <= c[0] < end)))
    return sections


def _snap(word_start: Sequence[bool], index: int, floor: int) -> int:
    """`index` moved back to the first token of its word, unless that reaches `floor`."""
    moved = index
    while moved > floor and not word_start[moved]:
        moved -= 1
    return moved if moved > floor else index


def _windows(
    offsets: Sequence[tuple[int, int]],
    text: str,
    code: Sequence[tuple[int, int]],
    config: ChunkerConfig,
) -> list[tuple[int, int]]:
    """Token windows (start, end) over one section, cut between words."""
    size, count = config.chunk_tokens, len(offsets)
    # a word-piece continuation touches the token before it; a chunk must not start there,
    # or the chunk's own text would tokenize differently
    word_start = [i == 0 or offsets[i][0] > offsets[i - 1][1] for i in range(count)]
    breaks = [i for i in range(1, count) if "\n\n" in text[offsets[i - 1][1] : offsets[i][0]]]
    blocks = []
    for first_char, last_char in code:
        inside = [i for i, (s, _) in enumerate(offsets) if first_char <= s < last_char]
        if inside and inside[-1] - inside[0] + 1 <= size:
            blocks.append((inside[0], inside[-1] + 1))
    windows, start = [], 0
    while start < count:
        end = min(start + size, count)
        if end < count:
            end = max([b for b in breaks if start + size // 2 < b <= end], default=end)
            for block_start, block_end in blocks:
                if start < block_start < end < block_end:
                    end = block_start
            end = _snap(word_start, end, start)
        windows.append((start, end))
        if end >= count:
            break
        start = _snap(word_start, max(end - config.overlap, start + 1), start)
    return windows


def chunk_document(
    document: Document, tokenizer: Tokenizer, config: ChunkerConfig = ChunkerConfig()
) -> list[Chunk]:
    """Cut one document into chunks (none for a document with no text)."""
    text = document.text
    chunks: list[Chunk] = []
    for section in _sections(text, document.format in _STRUCTURED):
        body = text[section.start : section.end]
        offsets = [(s + section.start, e + section.start) for s, e in tokenizer.offsets(body)]
        offsets = [(s, e) for s, e in offsets if e > s]
        for start, end in _windows(offsets, text, section.code, config):
            span = text[offsets[start][0] : offsets[end - 1][1]]
            position = len(chunks)
            metadata = {
                **document.metadata,
                "source": document.source,
                "section": section.path,
                "format": document.format,
            }
            chunk_id = chunk_id_for(document.source, position, span)
            chunks.append(Chunk(chunk_id, document.source, position, span, metadata))
    return chunks
