"""Path parameters in the OpenAPI document carry the grammar the domain checks them by.

Every `{name}` and `{project}` is a name (`core.ids.NAME_PATTERN`) and every `{ref}` a
reference (`NAME`, `NAME@vN`, `NAME@<digest>`, `NAME@ALIAS`; `REF_PATTERN`), so a client
generated from the document (or schemathesis) knows what the server accepts without a
400 or 404 to learn it. The routes stay as they are: the domain still checks each value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from forgeml.core.ids import NAME_PATTERN, REF_PATTERN

PATH_PATTERNS = {"name": NAME_PATTERN, "project": NAME_PATTERN, "ref": REF_PATTERN}


def with_path_patterns(app: FastAPI) -> None:
    """Make `app.openapi()` add a `pattern` to each known path parameter's schema."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        document = build()  # FastAPI caches it: patterned once
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                for parameter in operation.get("parameters", []):
                    pattern = PATH_PATTERNS.get(parameter["name"])
                    if parameter.get("in") == "path" and pattern is not None:
                        parameter["schema"].setdefault("pattern", pattern)
        return document

    app.openapi = openapi  # type: ignore[method-assign]
