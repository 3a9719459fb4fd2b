from __future__ import annotations

import pytest

from forgeml.core.errors import InvalidNameError, UsageError
from forgeml.core.ids import Ref, canonical_json, parse_ref, validate_name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("adult", Ref("adult")),
        ("adult@v3", Ref("adult", version=3)),
        ("adult-quarantine@abc123", Ref("adult-quarantine", digest_prefix="abc123")),
        ("sst2.dev@v12", Ref("sst2.dev", version=12)),
    ],
)
def test_parse_ref(text: str, expected: Ref) -> None:
    assert parse_ref(text) == expected
    assert str(parse_ref(text)) == text


@pytest.mark.parametrize("name", ["../etc", "a/b", "a\\b", ".hidden", "", "x" * 129, "a..b"])
def test_validate_name_refuses_paths(name: str) -> None:
    with pytest.raises(InvalidNameError, match="Invalid name"):
        validate_name(name)


@pytest.mark.parametrize("text", ["adult@", "adult@latest", "adult@v", "adult@abc"])
def test_parse_ref_refuses_bad_selectors(text: str) -> None:
    with pytest.raises(UsageError, match="after '@' give vN"):
        parse_ref(text)


def test_canonical_json_is_order_independent() -> None:
    assert canonical_json({"b": 1, "a": [1, 2]}) == canonical_json({"a": [1, 2], "b": 1})
