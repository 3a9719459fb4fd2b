from __future__ import annotations

import re

from forgeml.api._openapi import PATH_PATTERNS
from forgeml.core.errors import InvalidNameError
from forgeml.core.ids import NAME_PATTERN, REF_PATTERN, validate_name
from forgeml.core.workspace import Workspace
from tests.api.conftest import api_client


def test_every_name_and_ref_path_parameter_carries_its_grammar(api_workspace: Workspace) -> None:
    with api_client(api_workspace) as client:
        document = client.get("/openapi.json").json()
    seen = set()
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in PATH_PATTERNS:
                    assert parameter["schema"]["pattern"] == PATH_PATTERNS[parameter["name"]]
                    seen.add(parameter["name"])
    assert seen == {"name", "project", "ref"}


def test_the_published_grammar_is_the_one_names_are_checked_by() -> None:
    for good in ("adult", "a.b_c-1", "x" * 128):
        assert validate_name(good) == good and re.fullmatch(NAME_PATTERN, good)
    for bad in ("-a", "a/b", "a b", "x" * 129, "é"):
        assert not re.fullmatch(NAME_PATTERN, bad)
        try:
            validate_name(bad)
        except InvalidNameError:
            continue
        raise AssertionError(f"{bad!r} passed validate_name")
    for ref in ("adult", "adult@v3", "adult@3fa9c2", "model@production"):
        assert re.fullmatch(REF_PATTERN, ref)
    assert not re.fullmatch(REF_PATTERN, "adult@v3@v4")
