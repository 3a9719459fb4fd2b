"""The spans a model may quote from each passage, for a JSON schema that only admits them.

Told to copy words exactly, SmolLM2-135M paraphrased: 17 of 20 stdlib answers quoted
something not in its passage, and the check refused them. Under constrained decoding the
quote need not be left to the model: `answer`'s schema lists, per passage, the sentences
it may quote (an `enum`) tied to that passage's number (a `const`), so every quote a
schema-enforcing server lets through occurs verbatim in the passage it cites, and the
model's only choice is which one. `citations.verify` still checks each one, for servers
that ignore the schema.
"""

from __future__ import annotations

import re
from typing import Any

from forgeml.rag.citations import MIN_QUOTE_CHARS, Passage

__all__ = ["QUOTES_PER_PASSAGE", "QUOTE_CHARS", "citation_schema", "quotable"]

# a quote longer than this is cut at a word boundary: it still occurs verbatim, and the
# schema stays small enough for the decoder's parser to walk each step
QUOTE_CHARS = 160
# the first sentences of a passage; later ones are rarely the cited ones and each costs
# the decoder another branch
QUOTES_PER_PASSAGE = 8
# a sentence ends at . ! ? followed by whitespace, or at a blank line / line break
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*")
_WHITESPACE = re.compile(r"\s+")


def quotable(text: str) -> list[str]:
    """The sentences of `text` (whitespace runs as one space), each cut to `QUOTE_CHARS`.

    Each returned span occurs in `text` as `citations.find_quote` compares (whitespace runs
    equal), is at least `MIN_QUOTE_CHARS` long, and appears once, in text order.
    """
    spans: list[str] = []
    for piece in _SENTENCE_END.split(text):
        sentence = _WHITESPACE.sub(" ", piece).strip()
        if len(sentence) > QUOTE_CHARS:
            cut = sentence[: QUOTE_CHARS + 1]
            sentence = cut[: cut.rfind(" ")] if " " in cut else cut[:QUOTE_CHARS]
        if len(sentence) >= MIN_QUOTE_CHARS and sentence not in spans:
            spans.append(sentence)
        if len(spans) == QUOTES_PER_PASSAGE:
            break
    return spans


def citation_schema(passages: list[Passage]) -> dict[str, Any]:
    """A JSON schema for one citation: `{"n": k, "quote": one of passage k's sentences}`.

    A passage with no sentence long enough to quote offers no branch; with none at all
    the schema is the unconstrained `{"n": integer, "quote": string}`.
    """
    branches = [
        {
            "type": "object",
            # a one-value enum, not `const`: lm-format-enforcer 0.11 compares a number
            # `const` as if it were text and its parser fails mid-reply
            "properties": {"n": {"enum": [n]}, "quote": {"enum": spans}},
            "required": ["n", "quote"],
            "additionalProperties": False,
        }
        for n, passage in enumerate(passages, start=1)
        if (spans := quotable(passage.text))
    ]
    if not branches:
        return {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "quote": {"type": "string", "minLength": 1}},
            "required": ["n", "quote"],
            "additionalProperties": False,
        }
    return branches[0] if len(branches) == 1 else {"anyOf": branches}
