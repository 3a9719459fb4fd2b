"""Authorization in one place: every route declares the permission it needs, or is public.

A route takes `dependencies=[require("datasets:read")]` (a `resource:action` permission) or
`dependencies=[public()]`; `route_permission` reads the declaration back, so a test fails for
any route that has neither (MLflow's `test_authorization_coverage` does the same). The check
itself is the app's `Authorizer` (`app.state.authorizer`): it names the caller from the request
and allows or refuses the permission; anything it does not know it refuses. The embedded
single-user default is `SingleUser`: one local person, every permission, no login.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from forgeml.api._projects import PERMISSION, RESOURCE_KINDS

PUBLIC = "public"
_MARK = "__forgeml_permission__"
_RESOURCE_MARK = "__forgeml_resource__"


@dataclass(frozen=True)
class Principal:
    """Who made a request: the actor audit events name, and how they signed in."""

    actor: str
    kind: str = "user"


class Authorizer(Protocol):
    """Names a request's caller and decides one permission (raising a 401/403 error).

    On an item route, `request.state.resource_kind` names the kind of resource the route
    reads or changes (`require(..., resource=...)`; None elsewhere): an authorizer that
    knows projects decides in that resource's own project.
    """

    def authorize(self, request: Request, permission: str) -> Principal: ...

    def allows(self, request: Request, permission: str, project: str) -> bool:
        """Whether the caller `authorize` named for `request` holds `permission` in
        `project`: its decision, for the records a route shows beside the one it authorized
        (a lineage's neighbours in other projects)."""
        ...


class SingleUser:
    """The embedded default: the local person, allowed everything, without a login."""

    def __init__(self, actor: str | None = None) -> None:
        self.principal = Principal(actor or _local_user(), kind="local")

    def authorize(self, request: Request, permission: str) -> Principal:
        return self.principal

    def allows(self, request: Request, permission: str, project: str) -> bool:
        return True


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


def require(permission: str, *, resource: str | None = None) -> Any:
    """A route dependency: the caller must hold `permission` (`resource:action`).

    `resource`: on an item route, the kind of resource its path names (one of
    `forgeml.api._projects.RESOURCE_KINDS`): the caller is authorized in that resource's
    project rather than the request's.
    """
    if permission == PUBLIC or ":" not in permission:
        raise ValueError(f"A permission is 'resource:action', not {permission!r}.")
    if resource is not None and resource not in RESOURCE_KINDS:
        raise ValueError(
            f"Unknown resource kind {resource!r}: use one of {sorted(RESOURCE_KINDS)}."
        )

    def check(request: Request) -> Principal:
        authorizer: Authorizer = request.app.state.authorizer
        request.state.resource_kind = resource
        setattr(request.state, PERMISSION, permission)  # the route acts where it is decided
        principal = authorizer.authorize(request, permission)
        request.state.principal = principal
        return principal

    setattr(check, _MARK, permission)
    setattr(check, _RESOURCE_MARK, resource)
    return Depends(check)


def public() -> Any:
    """A route dependency that marks the route as open to anyone (health, login, webhooks
    that check their own secret)."""

    def open_route() -> None:
        return None

    setattr(open_route, _MARK, PUBLIC)
    return Depends(open_route)


def api_routes(routes: Iterable[BaseRoute]) -> Iterator[APIRoute]:
    """Every API route under `routes` (an app's or a router's), included routers walked."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        # FastAPI >= 0.16x keeps an included router whole instead of copying its routes
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from api_routes(included.routes)


def route_permission(route: APIRoute) -> str | None:
    """The permission `route` declared (`PUBLIC` for an open one), or None if it declared none."""
    pending = list(route.dependant.dependencies)
    while pending:
        dependant = pending.pop()
        call: Callable[..., Any] | None = dependant.call
        if call is not None and hasattr(call, _MARK):
            permission: str = getattr(call, _MARK)
            return permission
        pending.extend(dependant.dependencies)
    return None


def route_resource(route: APIRoute) -> str | None:
    """The kind of resource `route` declared it is authorized by (`require(..., resource=)`),
    or None for a route authorized in the request's project."""
    pending = list(route.dependant.dependencies)
    while pending:
        dependant = pending.pop()
        if dependant.call is not None and hasattr(dependant.call, _RESOURCE_MARK):
            kind: str | None = getattr(dependant.call, _RESOURCE_MARK)
            return kind
        pending.extend(dependant.dependencies)
    return None
