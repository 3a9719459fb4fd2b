from __future__ import annotations

import gc
import json
import time
import weakref
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from forgeml.core.errors import ConfigError
from forgeml.serve.structured import (
    check_schema,
    json_object_constraint,
    json_schema_constraint,
    tokenizer_data,
)
from tests.serve._smollm2 import SmolLM2, chat_prompt, greedy, load_smollm2


@pytest.fixture(scope="session")
def smollm2(smollm2_bundle: Path) -> SmolLM2:
    return load_smollm2(smollm2_bundle)


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
# every kind of schema the constraint enforces, in one reply: a string, an integer, an
# enum, a boolean, an array, a nested object and a $ref
BOOK = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 16},
        "year": {"type": "integer"},
        "genre": {"enum": ["novel", "poem", "play"]},
        "tags": {
            "type": "array",
            "items": {"type": "string", "maxLength": 10},
            "minItems": 1,
            "maxItems": 2,
        },
        "author": {
            "type": "object",
            "properties": {"name": {"$ref": "#/$defs/name"}},
            "required": ["name"],
        },
        "ok": {"type": "boolean"},
    },
    "required": ["title", "year", "genre", "tags", "author", "ok"],
    "$defs": {"name": {"type": "string", "maxLength": 12}},
}


def test_a_constrained_reply_parses_and_validates_against_every_schema_kind(
    smollm2: SmolLM2,
) -> None:
    question = "Name a book, its year, genre, tags and author as JSON."
    prompt = chat_prompt(smollm2.tokenizer, [{"role": "user", "content": question}])
    text, finish = greedy(smollm2, prompt, json_schema_constraint(smollm2.tokenizer, BOOK), 96)
    assert finish == "stop"
    jsonschema.validate(json.loads(text), BOOK)


def test_json_object_constraint_gives_one_object(smollm2: SmolLM2) -> None:
    prompt = chat_prompt(smollm2.tokenizer, [{"role": "user", "content": "Ada is 36. JSON?"}])
    text, finish = greedy(smollm2, prompt, json_object_constraint(smollm2.tokenizer), 24)
    if finish == "stop":
        assert isinstance(json.loads(text), dict)
    else:  # cut short by max_tokens: still the start of an object
        assert text.lstrip().startswith("{")


def test_tokenizer_data_is_built_once_per_tokenizer(smollm2: SmolLM2) -> None:
    first = tokenizer_data(smollm2.tokenizer)
    started = time.perf_counter()
    again = tokenizer_data(smollm2.tokenizer)
    assert again is first
    assert time.perf_counter() - started < 0.01
    assert len(first.regular_tokens) == len(smollm2.tokenizer) - len(
        set(smollm2.tokenizer.all_special_ids)
    )


class _CharTokenizer:
    """A five-token vocabulary, one character each; token 0 is EOS."""

    def __init__(self) -> None:
        self.all_special_ids = [0]
        self.eos_token_id = 0

    def __len__(self) -> int:
        return 5

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return ["x0ab{".index(char) for char in text]

    def decode(self, ids: list[int]) -> str:
        return "".join("x0ab{"[i] for i in ids)


def test_tokenizer_data_goes_with_its_tokenizer() -> None:
    tokenizer = _CharTokenizer()
    gone = weakref.ref(tokenizer)
    data = tokenizer_data(tokenizer)
    assert data.decoder([1, 4]) == "0{"
    del tokenizer, data
    gc.collect()
    assert gone() is None  # a replaced model's tokenizer is not kept by its cached data


def test_constraint_allows_only_json_openers_first(smollm2: SmolLM2) -> None:
    allowed = json_schema_constraint(smollm2.tokenizer, PERSON).allowed([])
    assert allowed is not None
    starts = {smollm2.tokenizer.decode([token]).lstrip()[:1] for token in allowed}
    assert starts <= {"{", ""}


@pytest.mark.parametrize(
    ("schema", "sentence"),
    [
        ({"type": "strin"}, "The JSON schema is invalid at type:"),
        ({"type": "object", "required": "name"}, "The JSON schema is invalid at required:"),
        (
            {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}},
            "The JSON schema uses 'minimum' at #/properties/age, which constrained decoding",
        ),
        ({"type": "array", "uniqueItems": True}, "The JSON schema uses 'uniqueItems' at #,"),
        ({"$ref": "https://example.com/s.json"}, "The JSON schema refers to 'https://"),
        ([1], "A JSON schema must be an object."),
        ({"const": True}, "The JSON schema's 'const' at # mixes kinds or holds true,"),
        ({"enum": ["a", 1]}, "The JSON schema's 'enum' at # mixes kinds"),
        ({"properties": {"x": {"enum": [None]}}}, "The JSON schema's 'enum' at #/properties/x"),
    ],
)
def test_unusable_schema_is_one_config_error_sentence(schema: Any, sentence: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_schema(schema)
    message = str(caught.value)
    assert message.startswith(sentence)
    assert message.endswith(".") and "\n" not in message


def test_valid_schemas_pass_the_check() -> None:
    for schema in (PERSON, BOOK, {}, {"type": "object"}):
        check_schema(schema)


def test_a_number_const_is_enforced_as_a_one_value_enum(smollm2: SmolLM2) -> None:
    """lm-format-enforcer compares `const` as text; a number there failed its parser."""
    schema = {
        "type": "object",
        "properties": {"n": {"const": 2}, "word": {"const": "two"}},
        "required": ["n", "word"],
        "additionalProperties": False,
    }
    prompt = chat_prompt(smollm2.tokenizer, [{"role": "user", "content": "Two as JSON?"}])
    text, finish = greedy(smollm2, prompt, json_schema_constraint(smollm2.tokenizer, schema), 32)
    assert finish == "stop"
    assert json.loads(text) == {"n": 2, "word": "two"}
