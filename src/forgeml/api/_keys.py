"""Gateway API key routes: list, create (the secret answered once), revoke, usage.

Answers are what `forgeml keys list|create|revoke|usage --json` print; nothing but `create`'s
answer ever holds a secret, and the store keeps only its salted hash. Keys belong to a
project: list, usage and create act in the request's project, a revoke is authorized in its
key's project (and must act there).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.gateway import create_key, list_keys, revoke_key, usage_report

router = CliRouter(prefix="/api/v1/keys")


class NewKey(BaseModel):
    """`POST /api/v1/keys`: as `forgeml keys create` takes it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=128, description="A label for people.")
    scopes: list[str] | None = Field(
        None, max_length=256, description="Deployments the key may call (default: all)."
    )
    rate_per_s: NonNegativeFloat | None = Field(None, description="Requests per second.")
    burst: PositiveInt | None = Field(None, description="Bucket size (default: the rate).")
    daily_quota: PositiveInt | None = Field(None, description="Most requests per UTC day.")


@router.get("", dependencies=[require("keys:read")])
def keys(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["created_at", "name"], "created_at"))],
) -> list[dict[str, Any]]:
    """Every key of the project (as `keys list --json`): prefix, scopes, limits, state; never
    a secret."""
    items = list_keys(workspace(request))
    kept, cursor = in_memory(items, page, lambda item, sort: (item[sort], item["id"]))
    link(request, response, cursor)
    return kept


@router.get("/usage", dependencies=[require("keys:read")])
def usage(
    request: Request,
    since: Annotated[
        datetime | None, Query(description="Only usage from this time on (UTC if naive).")
    ] = None,
) -> list[dict[str, Any]]:
    """Requests, errors and rejections per key of the project and deployment, as the
    gateways flushed them (as `keys usage --json`)."""
    start = since.replace(tzinfo=since.tzinfo or UTC) if since else None
    return usage_report(workspace(request), start)


@router.post("", status_code=201, dependencies=[require("keys:manage")])
def create(request: Request, body: NewKey) -> dict[str, Any]:
    """Create a key; the answer holds the full key once (`key`)."""
    summary, secret = create_key(
        acting(request), body.name, body.scopes, body.rate_per_s, body.burst, body.daily_quota
    )
    return {**summary, "key": secret}


@router.post("/{key}/revoke", dependencies=[require("keys:manage", resource="key")])
def revoke(request: Request, key: str) -> dict[str, Any]:
    """Revoke a key by prefix or id (409 when it was revoked already)."""
    return revoke_key(acting(request), key)
