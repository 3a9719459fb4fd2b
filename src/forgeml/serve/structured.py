"""Constrained decoding: the token ids a reply may take next so that it parses as JSON.

A `TokenConstraint` answers, for one request, which token ids may follow the ids generated
so far; the decode loop masks that row's logits to them and stops the row at EOS. The JSON
ones here wrap lm-format-enforcer (chosen over outlines and xgrammar: pure Python with no
compiled extension or Rust toolchain, and it walks a character-level parser over a prefix
tree of the vocabulary, so a schema costs nothing to "compile" per request).

What a tokenizer costs to prepare (the decoded text of every token and their prefix tree) is
built once per tokenizer and kept: about 1.5 s for SmolLM2's 49,152 tokens on 2 cores.

The schema is checked first (`check_schema`): an invalid one, or one using a keyword that
decoding cannot enforce (`minimum`, `uniqueItems`, `not`, ...), is a `ConfigError` sentence.
What a constraint lets through is checked again when the reply finishes (`check_reply`,
with `jsonschema`): the enforcer approximates some keywords (a `oneOf` is decoded as an
`anyOf`, so a value matching two branches gets through), and a reply that does not
validate is a `ConstraintFailedError` (a 500 naming the cause), never a body presented as
valid.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ConfigError, ConstraintFailedError
from forgeml.serve.tokens import TokenConstraint

if TYPE_CHECKING:
    from lmformatenforcer import TokenEnforcer, TokenEnforcerTokenizerData

__all__ = [
    "check_reply",
    "check_schema",
    "json_object_constraint",
    "json_schema_constraint",
]

# keywords whose breach lm-format-enforcer cannot prevent while decoding (it enforces type,
# properties, required, items, min/maxItems, enum, const, anyOf/allOf, oneOf as anyOf,
# $ref to $defs, min/maxLength and pattern); a schema using one is refused rather than
# served unchecked
UNENFORCED_KEYWORDS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "uniqueItems",
        "patternProperties",
        "not",
        "if",
        "then",
        "else",
        "prefixItems",
        "contains",
        "minContains",
        "maxContains",
        "dependentRequired",
        "dependentSchemas",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
# keywords whose value is a map of names to sub-schemas, or a list / one sub-schema
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "items", "additionalProperties")
_LOCAL_REFS = ("#/$defs/", "#/definitions/")
# whitespace in a row (between tokens and inside strings alike): the enforcer's default, 12,
# let a small model pad every token with blank lines until max_tokens cut the JSON short
MAX_CONSECUTIVE_WHITESPACE = 2


def _walk(schema: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema object of `schema` with its JSON pointer."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in _SCHEMA_MAPS:
        for name, sub in (schema.get(key) or {}).items():
            yield from _walk(sub, f"{path}/{key}/{name}")
    for key in _SCHEMA_LISTS:
        value = schema.get(key)
        items = value if isinstance(value, list) else [value]
        for index, sub in enumerate(items):
            where = f"{path}/{key}/{index}" if isinstance(value, list) else f"{path}/{key}"
            yield from _walk(sub, where)


def check_schema(schema: dict[str, Any]) -> None:
    """Raise ConfigError unless `schema` is a valid JSON schema that decoding can enforce.

    Args:
        schema: A JSON schema (any draft `jsonschema` knows; 2020-12 when it names none).

    Raises:
        ConfigError: the schema is invalid, uses a keyword decoding cannot enforce, or
            refers outside itself.
    """
    import jsonschema

    if not isinstance(schema, dict):
        raise ConfigError("A JSON schema must be an object.")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "the top"
        raise ConfigError(f"The JSON schema is invalid at {where}: {error.message}.") from None
    for pointer, sub in _walk(schema, "#"):
        unenforced = sorted(UNENFORCED_KEYWORDS.intersection(sub))
        if unenforced:
            raise ConfigError(
                f"The JSON schema uses '{unenforced[0]}' at {pointer}, which constrained "
                "decoding cannot enforce; remove it and check the value after the reply."
            )
        for keyword in ("const", "enum"):
            if keyword in sub and not _enforceable_values(sub[keyword], keyword):
                raise ConfigError(
                    f"The JSON schema's '{keyword}' at {pointer} mixes kinds or holds true, "
                    "false, null, an object or a list, which constrained decoding cannot "
                    "enforce; use strings or numbers only."
                )
        ref = sub.get("$ref")
        if ref is not None and not str(ref).startswith(_LOCAL_REFS):
            raise ConfigError(
                f"The JSON schema refers to '{ref}' at {pointer}; only references into "
                "its own $defs or definitions are supported."
            )


def check_reply(text: str, schema: dict[str, Any]) -> Any:
    """The JSON value of a finished reply decoded under `schema`, checked against it.

    Args:
        text: The whole reply (not cut by max_tokens: a cut reply is not checked).
        schema: The schema it was decoded under.

    Returns:
        The parsed value.

    Raises:
        ConstraintFailedError: the reply is not JSON, or not valid against `schema`
            (the sentence says where and why).
    """
    import jsonschema

    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConstraintFailedError(
            f"Constrained decoding failed: the reply is not JSON ({error.msg} at character "
            f"{error.pos}), though decoded under its schema."
        ) from None
    breach = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(value)
    )
    if breach is not None:
        where = "/".join(str(part) for part in breach.absolute_path) or "the top"
        raise ConstraintFailedError(
            f"Constrained decoding failed: the reply does not match its JSON schema at "
            f"{where} ('{breach.validator}': {breach.message}), which the decoder did not "
            "enforce."
        )
    return value


def _enforceable_values(value: Any, keyword: str) -> bool:
    """Whether a `const` value or `enum` list is all strings or all (non-bool) numbers."""
    values = [value] if keyword == "const" else value
    if not isinstance(values, list):
        return True  # jsonschema's check_schema has refused it already
    texts = all(isinstance(item, str) for item in values)
    numbers = all(isinstance(item, int | float) and not isinstance(item, bool) for item in values)
    return texts or numbers


def _as_enforced(schema: Any) -> Any:
    """`schema` written the way lm-format-enforcer 0.11 enforces it (the same constraint,
    or the nearest it can decode; `check_reply` holds the reply to the original).

    - a number `const: X` becomes `enum: [X]`: the enforcer compares a `const` as text, so
      a number there failed its parser mid-reply and the reply stopped short of valid JSON;
    - `oneOf` becomes `anyOf`: the enforcer ignores `oneOf` (a `oneOf` of strings let an
      object through). The two are equal when the branches do not overlap; a value
      matching two branches is caught when the reply finishes.
    """
    if isinstance(schema, list):
        return [_as_enforced(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    rewritten = {key: _as_enforced(value) for key, value in schema.items()}
    const = rewritten.get("const")
    if isinstance(const, int | float) and not isinstance(const, bool):
        del rewritten["const"]
        rewritten["enum"] = [const]
    if "oneOf" in rewritten and "anyOf" not in rewritten:
        rewritten["anyOf"] = rewritten.pop("oneOf")
    return rewritten


_TOKENIZER_DATA: weakref.WeakKeyDictionary[Any, TokenEnforcerTokenizerData] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def _build_tokenizer_data(tokenizer: Any) -> TokenEnforcerTokenizerData:
    from lmformatenforcer import TokenEnforcerTokenizerData

    # lm-format-enforcer's own transformers integration does not import under
    # transformers 5, so this is its `build_token_enforcer_tokenizer_data`, written out:
    # a token decoded after "0" shows whether it starts a word (a leading space)
    zero = tokenizer.encode("0", add_special_tokens=False)[-1]
    special = set(tokenizer.all_special_ids)
    regular = []
    for token in range(len(tokenizer)):
        if token in special:
            continue
        after_zero = tokenizer.decode([zero, token])[1:]
        alone = tokenizer.decode([token])
        regular.append((token, after_zero, len(after_zero) > len(alone)))

    # the data is the value of a weak mapping keyed by the tokenizer: a strong reference
    # back to it would keep both alive after the model version that owned them is gone
    owner: Callable[[], Any] = weakref.ref(tokenizer)

    def decode(tokens: list[int]) -> str:
        # a partial UTF-8 sequence decodes to U+FFFD until its last byte arrives
        return str(owner().decode(tokens)).rstrip("\ufffd")

    return TokenEnforcerTokenizerData(
        regular, decode, tokenizer.eos_token_id, False, len(tokenizer)
    )


def tokenizer_data(tokenizer: Any) -> TokenEnforcerTokenizerData:
    """The enforcer's view of `tokenizer`, built on first use and kept while it lives."""
    with _LOCK:
        data = _TOKENIZER_DATA.get(tokenizer)
        if data is None:
            data = _build_tokenizer_data(tokenizer)
            _TOKENIZER_DATA[tokenizer] = data
        return data


class _EnforcedConstraint:
    """A TokenConstraint over one lm-format-enforcer `TokenEnforcer` (one per request)."""

    def __init__(self, enforcer: TokenEnforcer) -> None:
        self._enforcer = enforcer

    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        return list(self._enforcer.get_allowed_tokens(list(generated)).allowed_tokens)


def json_schema_constraint(tokenizer: Any, schema: dict[str, Any]) -> TokenConstraint:
    """A constraint under which every finished reply is JSON valid against `schema`.

    Args:
        tokenizer: The model's Hugging Face tokenizer.
        schema: The JSON schema the reply must match (checked by `check_schema`).

    Returns:
        A fresh constraint for one request (it keeps that request's parse state).

    Raises:
        ConfigError: the schema is invalid or cannot be enforced.
    """
    from lmformatenforcer import JsonSchemaParser, TokenEnforcer

    check_schema(schema)
    try:
        parser = JsonSchemaParser(_as_enforced(schema))
    except Exception as error:  # pydantic's or the enforcer's own; both mean "not usable"
        first = str(error).splitlines()[0]
        raise ConfigError(f"The JSON schema cannot be used for decoding: {first}.") from None
    enforcer = TokenEnforcer(tokenizer_data(tokenizer), parser)
    # the enforcer replaces the parser's config with its own, so limit whitespace after
    parser.config.max_consecutive_whitespaces = MAX_CONSECUTIVE_WHITESPACE
    return _EnforcedConstraint(enforcer)


def json_object_constraint(tokenizer: Any) -> TokenConstraint:
    """A constraint under which every finished reply is one JSON object (`json_object`)."""
    return json_schema_constraint(tokenizer, {"type": "object"})
