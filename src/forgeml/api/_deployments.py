"""Deployment routes: list, show, delete, and the canary's share of the traffic.

Answers are what `forgeml deploy list|show|delete --json` print. `traffic` re-applies the current
spec with the canary's new weight as the next revision (as `forgeml deploy` with a new
`--weight` does): the weight is the router's, not the replicas', so they keep running.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.core.errors import InvalidRequestError
from forgeml.serve.deployments import (
    CanarySpec,
    apply_spec,
    delete,
    get_deployment,
    list_deployments,
)

router = CliRouter(prefix="/api/v1/deployments")


@router.get("", dependencies=[require("deployments:read")])
def deployments(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "updated_at"], "name"))],
    deleted: Annotated[bool, Query(description="Include deleted ones.")] = False,
) -> list[dict[str, Any]]:
    """Every deployment not deleted, or every one with `deleted` (as `deploy list --json`),
    a page at a time."""
    home = workspace(request)
    found = list_deployments(home, include_deleted=deleted, project=home.project)
    items = [deployment.to_dict() for deployment in found]
    kept, cursor = in_memory(items, page, lambda item, sort: (item[sort], item["name"]))
    link(request, response, cursor)
    return kept


@router.get("/{name}", dependencies=[require("deployments:read", resource="deployment")])
def show(request: Request, name: str) -> dict[str, Any]:
    """A deployment, its revision, spec and replicas (as `deploy show --json`)."""
    return get_deployment(workspace(request), name).to_dict()


class Traffic(BaseModel):
    """`POST /api/v1/deployments/{name}/traffic`: the canary's share of the requests."""

    model_config = ConfigDict(extra="forbid")

    canary_weight: int = Field(
        ge=0, le=100, description=CanarySpec.model_fields["weight"].description
    )


@router.post(
    "/{name}/traffic", dependencies=[require("deployments:traffic", resource="deployment")]
)
def traffic(request: Request, name: str, body: Traffic) -> dict[str, Any]:
    """Send `canary_weight` percent of the requests to the canary, as the next revision
    (409 when that is the weight already; 422 when the deployment has no canary)."""
    current = get_deployment(workspace(request), name)
    canary = current.spec.canary
    if canary is None or current.status in ("deleted", "failed"):
        raise InvalidRequestError(
            f"Deployment '{name}' has no canary to send traffic to "
            f"(it is {current.status}; deploy one with --canary MODEL_REF)."
        )
    spec = current.spec.model_copy(
        update={"canary": canary.model_copy(update={"weight": body.canary_weight})}
    )
    # a change of the deployment, in its own project (where the caller was authorized)
    home = acting(request).in_project(current.project)
    return apply_spec(home, name, spec).to_dict()


@router.delete("/{name}", dependencies=[require("deployments:write", resource="deployment")])
def delete_deployment(request: Request, name: str) -> dict[str, Any]:
    """Stop every replica of `name` and mark it deleted (as `deploy delete --json`; 404 when
    there is no such live deployment)."""
    return delete(acting(request), name).to_dict()
