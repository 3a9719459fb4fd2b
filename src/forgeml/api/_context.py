"""What a route needs from its app and its caller: the workspace, in the request's project
and as the caller acts on it."""

from __future__ import annotations

from fastapi import Request

from forgeml.api._authz import Principal
from forgeml.api._projects import request_project
from forgeml.core.workspace import Workspace


def workspace(request: Request) -> Workspace:
    """The app's workspace in the request's project (what its lists show), for reads."""
    found: Workspace = request.app.state.workspace
    # creates and lists act in the request's project, even on an item route authorized in
    # its resource's project: a name of another project is refused (409), never reused
    return found.in_project(request_project(request))


def acting(request: Request) -> Workspace:
    """The app's workspace with the authenticated caller as the actor of every record and
    audit event it writes (the route's `require` named the caller)."""
    principal: Principal = request.state.principal
    return workspace(request).acting_as(principal.actor)
