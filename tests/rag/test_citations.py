from __future__ import annotations

import inspect
import json
import os.path
import textwrap
from typing import Any

import pytest

from forgeml.rag.citations import (
    MIN_QUOTE_CHARS,
    ClaimedCitation,
    Passage,
    find_quote,
    verify,
)


def _passage(obj: Any) -> Passage:
    doc = inspect.getdoc(obj)
    assert doc is not None
    return Passage(f"{obj.__module__}.{obj.__qualname__}", doc, obj.__module__)


@pytest.fixture
def passages() -> list[Passage]:
    return [_passage(json.dumps), _passage(os.path.join), _passage(textwrap.dedent)]


def test_find_quote_gives_the_span_of_the_quote_in_the_passage() -> None:
    text = inspect.getdoc(json.dumps) or ""
    span = find_quote("Serialize ``obj`` to a JSON formatted ``str``", text)
    assert span is not None
    assert text[span[0] : span[1]] == "Serialize ``obj`` to a JSON formatted ``str``"


def test_find_quote_compares_whitespace_runs_as_one_space() -> None:
    text = "Remove any common leading\n   whitespace from every line."
    span = find_quote("  leading whitespace   from every\tline ", text)
    assert span is not None
    assert text[span[0] : span[1]] == "leading\n   whitespace from every line"


@pytest.mark.parametrize(
    "quote",
    [
        "serialize ``obj`` to a json formatted ``str``",  # case
        "Serialize `obj` to a JSON formatted `str`",  # punctuation
        "Serialize obj to a JSON-formatted string",  # paraphrase
        "",
        "a" * (MIN_QUOTE_CHARS - 1),
    ],
)
def test_find_quote_normalises_nothing_but_whitespace(quote: str) -> None:
    assert find_quote(quote, inspect.getdoc(json.dumps) or "") is None


def test_a_valid_citation_is_kept_with_its_chunk_id_and_span(passages: list[Passage]) -> None:
    claimed = [ClaimedCitation(2, "Join two or more pathname components")]
    checked = verify("os.path.join joins path parts [2].", claimed, passages)
    assert checked.text == "os.path.join joins path parts [2]."
    [citation] = checked.citations
    assert citation.chunk_id == "posixpath.join"
    assert passages[1].text[citation.start : citation.end] == citation.quote
    assert checked.dropped == []


def test_a_citation_to_a_passage_not_given_is_dropped_with_its_marker(
    passages: list[Passage],
) -> None:
    claimed = [ClaimedCitation(7, "Join two or more pathname components")]
    checked = verify("It joins paths [7].", claimed, passages)
    assert checked.text == "It joins paths."
    assert checked.citations == []
    assert "there is no passage [7]" in checked.dropped[0].reason


def test_a_paraphrased_quote_is_dropped(passages: list[Passage]) -> None:
    claimed = [ClaimedCitation(1, "Turns an object into a JSON string")]
    checked = verify("json.dumps makes JSON [1].", claimed, passages)
    assert checked.citations == []
    assert checked.text == "json.dumps makes JSON."
    assert "does not occur verbatim in passage [1]" in checked.dropped[0].reason


def test_a_quote_from_another_passage_is_dropped_and_says_where_it_is(
    passages: list[Passage],
) -> None:
    claimed = [ClaimedCitation(1, "Remove any common leading whitespace")]
    checked = verify("dedent strips indentation [1].", claimed, passages)
    assert checked.citations == []
    assert checked.dropped[0].reason == "the quote is from passage [3], not [1]"


def test_markers_without_any_claimed_citation_are_removed(passages: list[Passage]) -> None:
    checked = verify("It serialises [1] and joins [2].", [], passages)
    assert checked.text == "It serialises and joins."
    assert [d.n for d in checked.dropped] == [1, 2]


def test_a_marker_group_keeps_only_the_numbers_that_verify(passages: list[Passage]) -> None:
    claimed = [
        ClaimedCitation(1, "Serialize ``obj`` to a JSON formatted ``str``"),
        ClaimedCitation(3, "not in any passage at all"),
    ]
    checked = verify("dumps writes JSON [1, 3].", claimed, passages)
    assert checked.text == "dumps writes JSON [1]."
    assert [c.n for c in checked.citations] == [1]


def test_an_answer_without_markers_gets_its_verified_citations_appended(
    passages: list[Passage],
) -> None:
    claimed = [ClaimedCitation(3, "Remove any common leading whitespace")]
    checked = verify("dedent removes common leading whitespace.", claimed, passages)
    assert checked.text == "dedent removes common leading whitespace. [3]"
    assert [c.n for c in checked.citations] == [3]


def test_a_verified_citation_the_marked_answer_never_cites_is_dropped(
    passages: list[Passage],
) -> None:
    claimed = [
        ClaimedCitation(1, "Serialize ``obj`` to a JSON formatted ``str``"),
        ClaimedCitation(2, "Join two or more pathname components"),
    ]
    checked = verify("dumps writes JSON [1].", claimed, passages)
    assert [c.n for c in checked.citations] == [1]
    assert checked.dropped[0].reason == "the answer never cites it"


def test_the_same_citation_claimed_twice_is_kept_once(passages: list[Passage]) -> None:
    claim = ClaimedCitation(1, "Serialize ``obj`` to a JSON formatted ``str``")
    checked = verify("dumps [1].", [claim, claim], passages)
    assert len(checked.citations) == 1
