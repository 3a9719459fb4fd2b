"""What a route needs from its app and its caller: the workspace, as the caller acts on it."""

from __future__ import annotations

from fastapi import Request

from forgeml.api._authz import Principal
from forgeml.core.workspace import Workspace


def workspace(request: Request) -> Workspace:
    """The app's workspace, for reads."""
    found: Workspace = request.app.state.workspace
    return found


def acting(request: Request) -> Workspace:
    """The app's workspace with the authenticated caller as the actor of every record and
    audit event it writes (the route's `require` named the caller)."""
    principal: Principal = request.state.principal
    return workspace(request).acting_as(principal.actor)
