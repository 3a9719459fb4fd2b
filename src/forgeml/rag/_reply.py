"""Reading an LM's reply to `forgeml.rag.answer`'s prompt as an answer text and its claims.

The reply should be JSON (`{"answer": ..., "citations": [{"n": 1, "quote": ...}]}`), but
a server that ignores the JSON schema may fence it, embed it in prose, or cut it off at
max_tokens, and a small model may answer in free text with `[n]` markers and quoted spans:
each is read here. Nothing is trusted yet: `citations.verify` checks every claim.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from forgeml.rag.citations import MARKER, ClaimedCitation, Passage, find_quote

__all__ = ["Draft", "read_reply"]


@dataclass(frozen=True)
class Draft:
    """The model's reply read as an answer text (None: it declined) and its claims."""

    text: str | None
    claimed: list[ClaimedCitation]
    problem: str | None = None  # why the reply could not be read, one sentence


def read_reply(content: str, passages: list[Passage]) -> Draft:
    """The reply as JSON (plain, fenced, or embedded in prose), truncated JSON, or free text."""
    content = content.strip()
    if not content:
        return Draft(None, [], "The model's reply was empty.")
    for candidate in _json_candidates(content):
        try:
            parsed = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(parsed, dict) and "answer" in parsed:
            return _from_json(parsed)
    if '"answer"' in content:
        return _salvage(content)
    return _free_text(content, passages)


def _json_candidates(content: str) -> list[str]:
    fenced = re.findall(r"```(?:json)?\s*(.*?)```", content, flags=re.DOTALL)
    first, last = content.find("{"), content.rfind("}")
    embedded = [content[first : last + 1]] if 0 <= first < last else []
    return [content, *fenced, *embedded]


def _from_json(parsed: dict[str, Any]) -> Draft:
    text = parsed.get("answer")
    if text is None:
        return Draft(None, [])
    if not isinstance(text, str):
        return Draft(None, [], "The model's answer was not text.")
    claimed = []
    for item in parsed.get("citations") or []:
        if isinstance(item, dict) and isinstance(item.get("quote"), str):
            n = item.get("n")
            if isinstance(n, int) or (isinstance(n, str) and n.strip().isdigit()):
                claimed.append(ClaimedCitation(int(n), item["quote"]))
    return Draft(text, claimed)


_JSON_STRING = r'"((?:[^"\\]|\\.)*)"'


def _salvage(content: str) -> Draft:
    """Read a JSON reply that does not parse (cut off at max_tokens, a stray comma)."""
    found = re.search(r'"answer"\s*:\s*' + _JSON_STRING, content)
    if found is None:
        if re.search(r'"answer"\s*:\s*null', content):
            return Draft(None, [])
        return Draft(None, [], "The model's reply was malformed JSON with no answer text.")
    pairs = re.findall(r'"n"\s*:\s*"?(\d+)"?\s*,\s*"quote"\s*:\s*' + _JSON_STRING, content)
    claimed = [ClaimedCitation(int(n), _unescape(quote)) for n, quote in pairs]
    return Draft(_unescape(found.group(1)), claimed)


def _unescape(text: str) -> str:
    try:
        return str(json.loads(f'"{text}"'))
    except json.JSONDecodeError:
        return text


def _free_text(content: str, passages: list[Passage]) -> Draft:
    """Prose with `[n]` markers: each marker is paired with the quoted spans that verify."""
    quotes = re.findall(r'"([^"\n]+)"|“([^”\n]+)”', content)
    spans = [straight or curly for straight, curly in quotes]
    numbers = sorted({int(n) for m in MARKER.finditer(content) for n in m.group(1).split(",")})
    claimed = [
        ClaimedCitation(n, span)
        for n in numbers
        if 1 <= n <= len(passages)
        for span in spans
        if find_quote(span, passages[n - 1].text) is not None
    ]
    return Draft(content, claimed)
