"""RAG index routes: every index's latest version, an index's versions, one version's
lineage, and search (`rag versions|show|query`; the CLI has no list, the API's answers
`show` for each). Building an index reads files beside the server: it is a job
(`POST /api/v1/jobs` running `forgeml rag index`), not a route. A list shows the request's
project's indexes; an item route is authorized in its index's project."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.rag.versions import describe, find_index, latest_versions, resolve, versions_of

router = CliRouter(prefix="/api/v1/rag/indexes")


class Query(BaseModel):
    """`POST /api/v1/rag/indexes/{ref}/query`: what to search for, and how."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4096, description="What to search for.")
    k: int = Field(default=5, ge=1, le=100, description="How many hits.")
    mode: str = Field(default="hybrid", description="hybrid, dense or bm25.")
    filters: dict[str, str] = Field(
        default_factory=dict, max_length=32, description="Metadata a hit must have."
    )
    weight: float | None = Field(
        default=None, ge=0, le=1, description="Hybrid by convex combination (default: RRF)."
    )


@router.get("", dependencies=[require("rag:read")])
def list_indexes(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "created_at"], "name"))],
) -> list[dict[str, Any]]:
    """Every index of the request's project with its latest version (`rag show NAME --json`
    and `name`), by name."""
    home = workspace(request)
    with home.store.session() as session:
        latest = latest_versions(session, home.project)
        items = [{"name": name, **describe(version)} for name, version in latest]
    kept, cursor = in_memory(items, page, lambda item, sort: (item[sort], item["name"]))
    link(request, response, cursor)
    return kept


@router.get("/{name}/versions", dependencies=[require("rag:read", resource="rag_index")])
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


@router.get("/{ref}", dependencies=[require("rag:read", resource="rag_index")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A version (`NAME`, `NAME@vN`, `NAME@<digest>`): digest, config, sources, embedder."""
    with workspace(request).store.session() as session:
        return describe(resolve(session, ref))


@router.post("/{ref}/query", dependencies=[require("rag:read", resource="rag_index")])
def query(request: Request, ref: str, body: Query) -> list[dict[str, Any]]:
    """The `k` best chunks of the version for `text` (as `rag query --json`)."""
    opened = find_index(workspace(request), ref)
    try:
        hits = opened.search(body.text, body.k, body.mode, body.filters, body.weight)
    finally:
        opened.close()
    return [dict(hit.__dict__) for hit in hits]
