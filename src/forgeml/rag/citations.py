"""Verified citations: every `[n]` left in an answer resolves to a passage and a verbatim quote.

A model's answer arrives as text with `[n]` markers plus the (n, quote) pairs it claims.
`verify` keeps a pair only when `n` is a passage number that was given and the quote
occurs verbatim in that passage's text; the only normalisation is whitespace (runs of
spaces, tabs and newlines compare as one space, and the quote's ends are trimmed), never
case, punctuation or Unicode folding. Each kept citation carries the character span of the
quote in the passage's own text, so `passage.text[start:end] == citation.quote`. Markers
without a kept quote are removed from the text; a text with none left is not supported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "Citation",
    "ClaimedCitation",
    "DroppedCitation",
    "Passage",
    "Verified",
    "find_quote",
    "verify",
]

# "[1]", and groups such as "[1, 3]" or "[2,4,5]"
MARKER = re.compile(r"\[\s*(\d+(?:\s*,\s*\d+)*)\s*\]")
_WHITESPACE = re.compile(r"\s+")
# a quote shorter than this (whitespace normalised) proves nothing: "the" is in every passage
MIN_QUOTE_CHARS = 8


@dataclass(frozen=True)
class Passage:
    """One retrieved chunk shown to the model as `[n]` (n counts from 1 in list order)."""

    chunk_id: str
    text: str
    source: str


@dataclass(frozen=True)
class ClaimedCitation:
    """What the model wrote: passage number `n` and the span it says it quotes."""

    n: int
    quote: str


@dataclass(frozen=True)
class Citation:
    """A checked citation: `quote == passage.text[start:end]` for passage `n` (`chunk_id`)."""

    n: int
    chunk_id: str
    quote: str
    start: int
    end: int


@dataclass(frozen=True)
class DroppedCitation:
    """A claimed citation or marker that did not verify, and why (one sentence)."""

    n: int
    quote: str
    reason: str


@dataclass(frozen=True)
class Verified:
    """The answer text with only resolving markers, its citations, and what was removed."""

    text: str
    citations: list[Citation]
    dropped: list[DroppedCitation]


def find_quote(quote: str, text: str) -> tuple[int, int] | None:
    """The span of `quote` in `text`, comparing whitespace runs as one space.

    Args:
        quote: The span the model claims to quote.
        text: The passage's text.

    Returns:
        `(start, end)` such that `text[start:end]` is the quote as it stands in `text`
        (its own whitespace), or None when it does not occur or is too short to count.
    """
    needle = _WHITESPACE.sub(" ", quote).strip()
    if len(needle) < MIN_QUOTE_CHARS:
        return None
    squashed, origin = _squash(text)
    at = squashed.find(needle)
    if at < 0:
        return None
    return origin[at], origin[at + len(needle) - 1] + 1


def verify(text: str, claimed: list[ClaimedCitation], passages: list[Passage]) -> Verified:
    """Keep the claimed citations that resolve and the markers they back; drop the rest.

    A citation is kept when its passage number was given and its quote occurs in that
    passage (`find_quote`). A marker `[n]` stays only when a kept citation has that `n`;
    a kept citation whose `n` the text never marks is dropped, except that a text with no
    markers at all gets its kept citations' markers appended at its end.

    Args:
        text: The model's answer, with `[n]` markers.
        claimed: The (n, quote) pairs the model wrote.
        passages: The passages the model was shown, `[1]` first.

    Returns:
        The cleaned text, the kept citations (in the order claimed, duplicates removed) and
        every removed citation or marker with its reason.
    """
    kept, dropped = _check_claims(claimed, passages)
    marked = {n for match in MARKER.finditer(text) for n in _numbers(match)}
    if not marked and kept:
        text = text.rstrip() + " " + "".join(f"[{n}]" for n in sorted({c.n for c in kept}))
        marked = {c.n for c in kept}
    for citation in [c for c in kept if c.n not in marked]:
        dropped.append(_drop(citation.n, citation.quote, "the answer never cites it"))
    kept = [c for c in kept if c.n in marked]
    backed = {c.n for c in kept}
    for n in sorted(marked - backed):
        dropped.append(_drop(n, "", f"no verbatim quote backs marker [{n}]"))
    return Verified(_rewrite_markers(text, backed), kept, dropped)


def _check_claims(
    claimed: list[ClaimedCitation], passages: list[Passage]
) -> tuple[list[Citation], list[DroppedCitation]]:
    kept: list[Citation] = []
    dropped: list[DroppedCitation] = []
    for claim in claimed:
        if not 1 <= claim.n <= len(passages):
            reason = f"there is no passage [{claim.n}] (passages are [1] to [{len(passages)}])"
            dropped.append(_drop(claim.n, claim.quote, reason))
            continue
        passage = passages[claim.n - 1]
        span = find_quote(claim.quote, passage.text)
        if span is None:
            dropped.append(_drop(claim.n, claim.quote, _why_not_found(claim, passages)))
            continue
        start, end = span
        citation = Citation(claim.n, passage.chunk_id, passage.text[start:end], start, end)
        if citation not in kept:
            kept.append(citation)
    return kept, dropped


def _why_not_found(claim: ClaimedCitation, passages: list[Passage]) -> str:
    if len(_WHITESPACE.sub(" ", claim.quote).strip()) < MIN_QUOTE_CHARS:
        return f"the quote is shorter than {MIN_QUOTE_CHARS} characters"
    for m, other in enumerate(passages, start=1):
        if find_quote(claim.quote, other.text) is not None:
            return f"the quote is from passage [{m}], not [{claim.n}]"
    return f"the quote does not occur verbatim in passage [{claim.n}]"


def _drop(n: int, quote: str, reason: str) -> DroppedCitation:
    return DroppedCitation(n, quote, reason)


def _numbers(match: re.Match[str]) -> list[int]:
    return [int(part) for part in match.group(1).split(",")]


def _rewrite_markers(text: str, backed: set[int]) -> str:
    def keep(match: re.Match[str]) -> str:
        numbers = [n for n in _numbers(match) if n in backed]
        return f"[{', '.join(map(str, numbers))}]" if numbers else ""

    rewritten = MARKER.sub(keep, text)
    # a removed marker leaves "word ." or "a  b" behind
    rewritten = re.sub(r"[ \t]+([.,;:!?])", r"\1", rewritten)
    return re.sub(r"[ \t]{2,}", " ", rewritten).strip()


def _squash(text: str) -> tuple[str, list[int]]:
    """`text` with each whitespace run as one space, and each kept char's index in `text`."""
    chars: list[str] = []
    origin: list[int] = []
    for match in re.finditer(r"\s+|\S+", text):
        if match.group().isspace():
            chars.append(" ")
            origin.append(match.start())
        else:
            chars.extend(match.group())
            origin.extend(range(match.start(), match.end()))
    return "".join(chars), origin
