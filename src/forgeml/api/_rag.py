"""RAG index routes: every index's latest version, an index's versions and one version's
lineage (`rag versions|show`; the CLI has no list, the API's answers `show` for each)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, Response

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.rag.versions import describe, latest_versions, resolve, versions_of

router = CliRouter(prefix="/api/v1/rag/indexes")


@router.get("", dependencies=[require("rag:read")])
def list_indexes(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "created_at"], "name"))],
) -> list[dict[str, Any]]:
    """Every index with its latest version (`rag show NAME --json` and `name`), by name."""
    with workspace(request).store.session() as session:
        items = [{"name": name, **describe(latest)} for name, latest in latest_versions(session)]
    kept, cursor = in_memory(items, page, lambda item, sort: (item[sort], item["name"]))
    link(request, response, cursor)
    return kept


@router.get("/{name}/versions", dependencies=[require("rag:read")])
def versions(
    request: Request,
    response: Response,
    name: str,
    page: Annotated[Page, Depends(pages(["version"], "version"))],
) -> list[dict[str, Any]]:
    """Every version of index `name` (as `rag versions --json`), oldest first unless sorted."""
    with workspace(request).store.session() as session:
        items = [describe(version) for version in versions_of(session, name)]
    kept, cursor = in_memory(items, page, lambda item, _: (item["version"], item["version"]))
    link(request, response, cursor)
    return kept


@router.get("/{ref}", dependencies=[require("rag:read")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A version (`NAME`, `NAME@vN`, `NAME@<digest>`): digest, config, sources, embedder."""
    with workspace(request).store.session() as session:
        return describe(resolve(session, ref))
