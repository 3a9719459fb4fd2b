"""What a route needs from its app and its caller: the workspace, in the project the route
acts in and as the caller acts on it.

A route acts in the project its permission was decided in (`decision_project`, before an
item route's resource lookup): the request's project for a partitioned kind (datasets,
runs, agent runs, labels, keys, ...) and for the read of a shared one (`queues:read`), else
`default` (or the route's `{project}` / declared `?project=`). So a route that changes an
install-wide kind (queues, audit, accounts) never acts in a project an `X-Forgeml-Project`
header names: its caller was not authorized there.
"""

from __future__ import annotations

from fastapi import Request

from forgeml.api._authz import Principal
from forgeml.api._projects import PERMISSION, decision_project, request_project
from forgeml.core.workspace import Workspace


def acting_project(request: Request) -> str:
    """The project a route acts in: the one the permission its `require` recorded is decided
    in, else (no permission recorded yet) the request's project."""
    permission: str | None = getattr(request.state, PERMISSION, None)
    if permission is None:
        return request_project(request)
    return decision_project(request, permission)


def workspace(request: Request) -> Workspace:
    """The app's workspace in the project the route acts in (what its lists show), for
    reads."""
    found: Workspace = request.app.state.workspace
    # creates and lists act in the request's project, even on an item route authorized in
    # its resource's project: a name of another project is refused (409), never reused
    return found.in_project(acting_project(request))


def acting(request: Request) -> Workspace:
    """The app's workspace with the authenticated caller as the actor of every record and
    audit event it writes (the route's `require` named the caller)."""
    principal: Principal = request.state.principal
    return workspace(request).acting_as(principal.actor)
