"""The quotable sentences of a passage, and the answer schema that only admits them."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from forgeml.rag._quotes import QUOTE_CHARS, QUOTES_PER_PASSAGE, citation_schema, quotable
from forgeml.rag.answer import RESPONSE_FORMAT, response_format
from forgeml.rag.citations import MIN_QUOTE_CHARS, Passage, find_quote
from forgeml.serve.structured import check_schema

JOIN = Passage(
    "os.path.join",
    "Join two or more pathname components, inserting '/' as needed.\n"
    "If any component is an absolute path, all previous path components\n"
    "will be discarded.  An empty last part will result in a path that\n"
    "ends with a separator.",
    "posixpath",
)


def test_a_passage_is_offered_as_its_sentences_with_whitespace_runs_as_one_space() -> None:
    assert quotable(JOIN.text) == [
        "Join two or more pathname components, inserting '/' as needed.",
        "If any component is an absolute path, all previous path components",
        "will be discarded.",
        "An empty last part will result in a path that",
        "ends with a separator.",
    ]


def test_long_sentences_are_cut_at_a_word_and_short_or_repeated_ones_are_left_out() -> None:
    long = "word " * 100
    spans = quotable(f"Yes. {long.strip()}. Again here. Again here.")
    assert spans[0].startswith("word word") and len(spans[0]) <= QUOTE_CHARS
    assert not spans[0].endswith(" ")
    assert spans[1:] == ["Again here."]
    assert quotable("x " * 40 + "\n\nshort") == [("x " * 40).strip()]


def test_at_most_quotes_per_passage_spans_are_offered() -> None:
    text = " ".join(f"Sentence number {n} here." for n in range(50))
    assert len(quotable(text)) == QUOTES_PER_PASSAGE


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab .!?\n\t'\"\\é"), max_size=400))
def test_every_offered_span_is_found_verbatim_in_its_passage(text: str) -> None:
    for span in quotable(text):
        found = find_quote(span, text)
        assert found is not None
        start, end = found
        assert re.sub(r"\s+", " ", text[start:end]) == span
        assert len(span) >= MIN_QUOTE_CHARS


def test_each_citation_branch_ties_a_passage_number_to_its_own_sentences() -> None:
    other = Passage("json.dumps", "Serialize obj to a JSON formatted str.", "json")
    schema = citation_schema([JOIN, Passage("empty", "a b", "x"), other])
    first, second = schema["anyOf"]
    assert first["properties"]["n"] == {"enum": [1]}
    assert first["properties"]["quote"]["enum"] == quotable(JOIN.text)
    assert second["properties"]["n"] == {"enum": [3]}  # passage 2 has nothing to quote
    assert second["properties"]["quote"]["enum"] == ["Serialize obj to a JSON formatted str."]


def test_with_nothing_quotable_the_citation_is_any_number_and_text() -> None:
    schema = citation_schema([Passage("tiny", "ok", "x")])
    assert schema["properties"]["quote"] == {"type": "string", "minLength": 1}


def test_forgemls_server_can_enforce_the_per_question_schema() -> None:
    passages = [JOIN, Passage("json.dumps", "Serialize obj to a JSON formatted str.", "json")]
    check_schema(response_format(passages)["json_schema"]["schema"])
    check_schema(RESPONSE_FORMAT["json_schema"]["schema"])
    assert response_format([])["json_schema"]["schema"] == RESPONSE_FORMAT["json_schema"]["schema"]
