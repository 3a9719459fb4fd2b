"""What the OpenAPI document adds to the routes': path grammars and links.

Every `{name}` and `{project}` is a name (`core.ids.NAME_PATTERN`) and every `{ref}` a
reference (`NAME`, `NAME@vN`, `NAME@<digest>`, `NAME@ALIAS`; `REF_PATTERN`), so a client
generated from the document (or schemathesis) knows what the server accepts without a
400 or 404 to learn it. The routes stay as they are: the domain still checks each value.

Links (OpenAPI 3.1, 4.8.20) say where a created thing's id goes next: a submitted job's
`job_id` to its show, cancel and retry, a queue's `name` to its show, a token's `id` to its
revoke. Schemathesis's state machine walks them (`tests/api/test_schemathesis_stateful.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from forgeml.core.ids import NAME_PATTERN, REF_PATTERN

PATH_PATTERNS = {"name": NAME_PATTERN, "project": NAME_PATTERN, "ref": REF_PATTERN}
# (path, method) of a 201 -> {link name: (target path, target method, {parameter: field})}
LINKS: dict[tuple[str, str], dict[str, tuple[str, str, dict[str, str]]]] = {
    ("/api/v1/jobs", "post"): {
        "ShowJob": ("/api/v1/jobs/{ref}", "get", {"ref": "job_id"}),
        "CancelJob": ("/api/v1/jobs/{ref}/cancel", "post", {"ref": "job_id"}),
        "RetryJob": ("/api/v1/jobs/{ref}/retry", "post", {"ref": "job_id"}),
    },
    ("/api/v1/queues", "post"): {
        "ShowQueue": ("/api/v1/queues/{name}", "get", {"name": "name"}),
    },
    ("/api/v1/tokens", "post"): {
        "RevokeToken": ("/api/v1/tokens/{token_id}", "delete", {"token_id": "id"}),
    },
}


def with_path_patterns(app: FastAPI) -> None:
    """Make `app.openapi()` add a `pattern` to each known path parameter's schema, and
    the `LINKS` to the operations of this app that have them."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        document = build()  # FastAPI caches it: amended once
        paths = document.get("paths", {})
        for operations in paths.values():
            for operation in operations.values():
                for parameter in operation.get("parameters", []):
                    pattern = PATH_PATTERNS.get(parameter["name"])
                    if parameter.get("in") == "path" and pattern is not None:
                        parameter["schema"].setdefault("pattern", pattern)
        _add_links(paths)
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _add_links(paths: dict[str, Any]) -> None:
    for (path, method), links in LINKS.items():
        created = paths.get(path, {}).get(method, {}).get("responses", {}).get("201")
        if created is None:
            continue
        created["links"] = {
            name: {
                "operationRef": f"#/paths/{_pointer(target)}/{verb}",
                "parameters": {key: f"$response.body#/{field}" for key, field in fields.items()},
            }
            for name, (target, verb, fields) in links.items()
            if verb in paths.get(target, {})
        }


def _pointer(path: str) -> str:
    # JSON Pointer (RFC 6901): `~` as `~0`, `/` as `~1`
    return path.replace("~", "~0").replace("/", "~1")
