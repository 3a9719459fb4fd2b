from __future__ import annotations

import base64
import bisect
import collections
import difflib
import fnmatch
import functools
import glob
import heapq
import inspect
import itertools
import json
import math
import os.path
import random
import shutil
import statistics
import tempfile
import textwrap
import urllib.parse
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forgeml.core.errors import InvalidDataError
from forgeml.prompts.client import ChatReply
from forgeml.rag.answer import (
    BUILTIN_PROMPT,
    NOT_SUPPORTED,
    Answer,
    BuiltinAnswerPrompt,
    Usage,
    answer,
    response_format,
)
from forgeml.rag.citations import MARKER, Passage
from tests.serve._smollm2 import load_smollm2

# (question, the object whose docstring answers it); the docstring's first paragraph is
# the passage, shown with the next two objects' as distractors
QUESTIONS: list[tuple[str, Any]] = [
    ("What does json.dumps do?", json.dumps),
    ("What does os.path.join do?", os.path.join),
    ("What does textwrap.dedent remove?", textwrap.dedent),
    ("What is collections.Counter?", collections.Counter),
    ("What does math.isclose determine?", math.isclose),
    ("What does shutil.copyfile do?", shutil.copyfile),
    ("What does itertools.chain return?", itertools.chain),
    ("What kind of decorator is functools.lru_cache?", functools.lru_cache),
    ("What does random.shuffle do to a list?", random.Random.shuffle),
    ("What does heapq.heappush do?", heapq.heappush),
    ("What does bisect.insort do?", bisect.insort),
    ("What does statistics.median return?", statistics.median),
    ("What does glob.glob return?", glob.glob),
    ("What does base64.b64encode do?", base64.b64encode),
    ("What does zlib.crc32 compute?", zlib.crc32),
    ("What does tempfile.mkdtemp create?", tempfile.mkdtemp),
    ("How many components does urllib.parse.urlsplit parse a URL into?", urllib.parse.urlsplit),
    ("What does difflib.get_close_matches return?", difflib.get_close_matches),
    ("What does fnmatch.fnmatch test?", fnmatch.fnmatch),
    ("What does inspect.getdoc return?", inspect.getdoc),
]


def _passage(obj: Any) -> Passage:
    doc = inspect.getdoc(obj) or ""
    return Passage(f"{obj.__module__}.{obj.__qualname__}", doc.split("\n\n")[0], obj.__module__)


def _passages_for(index: int) -> list[Passage]:
    objects = [QUESTIONS[(index + k) % len(QUESTIONS)][1] for k in range(3)]
    return [_passage(obj) for obj in objects]


class FixedModel:
    """The ChatModel protocol's test double: replies with fixed text, records the request."""

    def __init__(self, content: str | None, finish_reason: str = "stop") -> None:
        self.content = content
        self.finish_reason = finish_reason
        self.requests: list[dict[str, Any]] = []

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatReply:
        self.requests.append({"messages": messages, **options})
        return ChatReply(self.content, self.finish_reason, 100, 20, model="fixed")


def assert_resolves(result: Answer, passages: list[Passage]) -> None:
    """Every [n] in the text has a citation whose quote is verbatim in passage n, or refused."""
    if not result.supported:
        assert result.text == NOT_SUPPORTED
        assert result.citations == []
        assert result.refused_reason
        return
    assert result.citations
    cited = {c.n for c in result.citations}
    for match in MARKER.finditer(result.text):
        assert {int(n) for n in match.group(1).split(",")} <= cited
    for citation in result.citations:
        passage = passages[citation.n - 1]
        assert citation.chunk_id == passage.chunk_id
        assert passage.text[citation.start : citation.end] == citation.quote


@pytest.fixture
def passages() -> list[Passage]:
    return _passages_for(0)  # json.dumps, os.path.join, textwrap.dedent


VALID = json.dumps(
    {
        "answer": "json.dumps serialises an object to a JSON string [1].",
        "citations": [{"n": 1, "quote": "Serialize ``obj`` to a JSON formatted ``str``"}],
    }
)


def test_a_valid_json_answer_is_returned_with_resolved_citations(
    passages: list[Passage],
) -> None:
    model = FixedModel(VALID)
    result = answer("What does json.dumps do?", passages, model)
    assert result.supported
    assert result.text == "json.dumps serialises an object to a JSON string [1]."
    assert [(c.n, c.chunk_id) for c in result.citations] == [(1, "json.dumps")]
    assert result.prompt_ref == "builtin:rag-answer@1"
    assert result.usage == Usage(100, 20)
    assert_resolves(result, passages)


def test_the_request_carries_the_numbered_passages_and_the_json_schema(
    passages: list[Passage],
) -> None:
    model = FixedModel(VALID)
    answer("What does json.dumps do?", passages, model, max_tokens=64, seed=7)
    [request] = model.requests
    assert request["response_format"] == response_format(passages)
    assert (request["max_tokens"], request["seed"], request["temperature"]) == (64, 7, 0.0)
    system, example, example_reply, user = request["messages"]
    assert system["content"] == BUILTIN_PROMPT.system
    assert [example["role"], example_reply["role"]] == ["user", "assistant"]
    json.loads(example_reply["content"])
    assert "[2] (posixpath) Join two or more pathname components" in user["content"]
    assert user["content"].endswith("Question: What does json.dumps do?")


def test_a_fenced_json_block_is_read(passages: list[Passage]) -> None:
    result = answer("q?", passages, FixedModel(f"Here it is:\n```json\n{VALID}\n```\n"))
    assert result.supported
    assert [c.n for c in result.citations] == [1]


def test_json_cut_off_at_max_tokens_is_salvaged(passages: list[Passage]) -> None:
    cut = VALID[: VALID.index("``str``") + len("``str``") + 1] + '}, {"n": 2, "quo'
    result = answer("q?", passages, FixedModel(cut))
    assert result.supported
    assert [c.quote for c in result.citations] == ["Serialize ``obj`` to a JSON formatted ``str``"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ('{"answer": "dumps [1]", "citations": [', "No citation in the answer quotes"),
        ('{"answer": 3, "citations": []}', "The model's answer was not text."),
        ('{"answer": null, "citations": []}', "The model said the passages do not contain"),
        ("", "The model's reply was empty."),
        ('{"answer" "dumps [1]"', "malformed JSON with no answer text"),
    ],
)
def test_malformed_or_declining_replies_are_refused_with_a_reason(
    passages: list[Passage], reply: str, reason: str
) -> None:
    result = answer("q?", passages, FixedModel(reply))
    assert not result.supported
    assert result.text == NOT_SUPPORTED
    assert result.refused_reason is not None and reason in result.refused_reason


@pytest.mark.parametrize(
    ("claim", "reason"),
    [
        ({"n": 4, "quote": "Join two or more pathname components"}, "there is no passage [4]"),
        ({"n": 1, "quote": "Converts obj into JSON text"}, "does not occur verbatim"),
        ({"n": 1, "quote": "Join two or more pathname components"}, "from passage [2], not [1]"),
    ],
)
def test_an_answer_whose_only_citation_fails_is_refused(
    passages: list[Passage], claim: dict[str, Any], reason: str
) -> None:
    reply = json.dumps({"answer": f"It does this [{claim['n']}].", "citations": [claim]})
    result = answer("q?", passages, FixedModel(reply))
    assert not result.supported
    assert result.refused_reason is not None and reason in result.refused_reason
    assert result.dropped[0].n == claim["n"]


def test_a_reply_cut_off_before_its_answer_ended_says_so(passages: list[Passage]) -> None:
    model = FixedModel('{"answer": "json.dumps serialises an object and then', "length")
    result = answer("q?", passages, model, max_tokens=12)
    assert result.refused_reason == "The model's reply was cut off at max_tokens (12) unfinished."


def test_an_answer_with_no_citations_is_refused(passages: list[Passage]) -> None:
    reply = json.dumps({"answer": "json.dumps returns JSON.", "citations": []})
    result = answer("q?", passages, FixedModel(reply))
    assert not result.supported
    assert result.text == NOT_SUPPORTED


def test_free_text_with_markers_and_quoted_spans_is_verified(passages: list[Passage]) -> None:
    reply = (
        'os.path.join will "Join two or more pathname components" [2], and dedent '
        'is unrelated [3]. Also "made up words here" [1].'
    )
    result = answer("q?", passages, FixedModel(reply))
    assert result.supported
    assert [c.n for c in result.citations] == [2]
    assert "[3]" not in result.text and "[1]" not in result.text
    assert_resolves(result, passages)


def test_no_passages_are_refused_without_asking_the_model() -> None:
    model = FixedModel(VALID)
    result = answer("What does json.dumps do?", [], model)
    assert result.refused_reason == "No passages were retrieved for this question."
    assert model.requests == []


def test_an_empty_question_is_an_error(passages: list[Passage]) -> None:
    with pytest.raises(InvalidDataError, match="The question is empty"):
        answer("  ", passages, FixedModel(VALID))


def test_a_given_prompt_is_used_and_recorded(passages: list[Passage]) -> None:
    prompt = BuiltinAnswerPrompt("rag-answer@3", "Answer in JSON.", "{passages}\nQ: {question}")
    model = FixedModel(VALID)
    result = answer("q?", passages, model, prompt=prompt)
    assert result.prompt_ref == "rag-answer@3"
    assert model.requests[0]["prompt"] == "rag-answer@3"  # sent along for the server's log
    assert [m["role"] for m in model.requests[0]["messages"]] == ["system", "user"]
    assert model.requests[0]["messages"][1]["content"].endswith("\nQ: q?")


_fragment = st.one_of(
    st.sampled_from([p.text for p in _passages_for(0)]).flatmap(
        lambda text: st.tuples(st.integers(0, len(text)), st.integers(0, 60)).map(
            lambda ij: text[ij[0] : ij[0] + ij[1]]
        )
    ),
    st.text(max_size=30),
)


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(st.one_of(st.text(max_size=20), st.integers(-1, 5).map(lambda n: f"[{n}]"))),
    claims=st.lists(st.tuples(st.integers(-1, 5), _fragment), max_size=5),
    as_json=st.booleans(),
)
def test_whatever_the_model_writes_every_marker_resolves_or_it_is_refused(
    text: list[str], claims: list[tuple[int, str]], as_json: bool
) -> None:
    passages = _passages_for(0)
    body = "".join(text)
    if as_json:
        cited = [{"n": n, "quote": quote} for n, quote in claims]
        reply = json.dumps({"answer": body, "citations": cited})
    else:
        reply = body + " " + " ".join(f'"{quote}" [{n}]' for n, quote in claims)
    assert_resolves(answer("q?", passages, FixedModel(reply)), passages)


class SmolLM2Chat:
    """ChatModel over SmolLM2-135M-Instruct in process (the served one: tests/serve)."""

    def __init__(self, bundle: Path) -> None:
        import torch

        lm = load_smollm2(bundle)
        self.torch = torch
        self.tokenizer = lm.tokenizer
        self.model = lm.model

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatReply:
        inputs: Any = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with self.torch.no_grad():
            output = self.model.generate(
                **inputs, max_new_tokens=options.get("max_tokens") or 128, do_sample=False
            )
        written = output[0][inputs["input_ids"].shape[-1] :]
        content = str(self.tokenizer.decode(written, skip_special_tokens=True))
        usage = (inputs["input_ids"].shape[-1], len(written))
        stopped = "length" if len(written) >= (options.get("max_tokens") or 128) else "stop"
        return ChatReply(content, stopped, *usage, model="SmolLM2-135M-Instruct")


@pytest.fixture(scope="module")
def smollm2(smollm2_bundle: Path) -> SmolLM2Chat:
    return SmolLM2Chat(smollm2_bundle)


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 12])
def test_smollm2_answers_resolve_verbatim_or_are_refused(smollm2: SmolLM2Chat, index: int) -> None:
    question = QUESTIONS[index][0]
    passages = _passages_for(index)
    result = answer(question, passages, smollm2, max_tokens=96)
    assert_resolves(result, passages)
