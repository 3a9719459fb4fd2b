"""Deployment routes: list and show, answering what `forgeml deploy list|show --json` print."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, Response

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.serve.deployments import get_deployment, list_deployments

router = CliRouter(prefix="/api/v1/deployments")


@router.get("", dependencies=[require("deployments:read")])
def deployments(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "updated_at"], "name"))],
) -> list[dict[str, Any]]:
    """Every deployment not deleted (as `deploy list --json`), a page at a time."""
    items = [deployment.to_dict() for deployment in list_deployments(workspace(request))]
    kept, cursor = in_memory(items, page, lambda item, sort: (item[sort], item["name"]))
    link(request, response, cursor)
    return kept


@router.get("/{name}", dependencies=[require("deployments:read")])
def show(request: Request, name: str) -> dict[str, Any]:
    """A deployment, its revision, spec and replicas (as `deploy show --json`)."""
    return get_deployment(workspace(request), name).to_dict()
