"""A page asks what the API would: the permission an API route declares, and the app's
authorizer's answer, so a page and its API route never disagree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request

from forgeml.api._authz import api_routes, require, route_permission
from forgeml.core.errors import AuthenticationError, PermissionDeniedError


def permission_of(router: APIRouter, endpoint: Callable[..., Any]) -> str:
    """The permission `router`'s route for `endpoint` declares (`require(...)`).

    Raises:
        LookupError: no route of `router` is served by `endpoint`, or it declares none.
    """
    for route in api_routes(router.routes):
        if route.endpoint is endpoint:
            permission = route_permission(route)
            if permission is not None:
                return permission
    raise LookupError(f"{endpoint.__qualname__} is no route of {router.prefix} with a permission.")


def same_as(router: APIRouter, endpoint: Callable[..., Any]) -> Any:
    """A page-route dependency: the caller must hold what the API route for `endpoint`
    requires (the app's authorizer decides, as it does for the API)."""
    return require(permission_of(router, endpoint))


def allowed(request: Request, router: APIRouter, endpoint: Callable[..., Any]) -> bool:
    """Whether the caller may use the API route for `endpoint`: a page leaves out a button
    its viewer may not press (the route refuses it anyway)."""
    try:
        request.app.state.authorizer.authorize(request, permission_of(router, endpoint))
    except (AuthenticationError, PermissionDeniedError):
        return False
    return True
