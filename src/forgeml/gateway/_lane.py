"""The forwarding routes without FastAPI's middleware, routing and dependency machinery.

Every request the gateway forwards would pay for FastAPI's middleware stack, for trying
each route's pattern and for solving the `authenticate` dependency before `Gateway.handle`
runs, which is a good part of what the gateway adds to a call of a fast model. The app
calls `ForwardLane` before any of that (`_app._GatewayApp`); it recognises the
forwarded POST routes by their paths, authenticates and calls `Gateway.handle` as the
routes in `_app` do, and answers a `ForgemlError` as their handler does. Everything else
(GET metadata, `/v1/models`, `/healthz`, `/metrics`, malformed paths) goes through
FastAPI, where the routes stay.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from forgeml.core.errors import ForgemlError
from forgeml.gateway._responses import error_response, model_in_body_path
from forgeml.gateway._service import Gateway, model_in_body

# a deployment name from the path, or a function reading it from the body (OpenAI routes)
Deployment = str | Callable[[bytes], str]


class ForwardLane:
    """An ASGI app forwarding the inference POSTs of `gateway` itself; `app` gets the rest."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        deployment = self._deployment(scope)
        if deployment is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            key = await self.gateway.authenticate(request)
            response = await self.gateway.handle(request, key, deployment)
        except ForgemlError as error:
            response = error_response(scope["path"], error)
        await response(scope, receive, send)

    @staticmethod
    def _deployment(scope: Scope) -> Deployment | None:
        """What `_app`'s POST routes would call for this request, or None: not one of them."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        path: str = scope["path"]
        if model_in_body_path(path):
            return model_in_body
        if path.startswith("/v2/models/"):  # /v2/models/{deployment}/{rest:path}
            name, slash, _ = path[len("/v2/models/") :].partition("/")
            return name if name and slash else None
        if path.startswith("/v1/models/") and path.endswith(":predict"):
            name = path[len("/v1/models/") : -len(":predict")]
            return name if name and "/" not in name else None
        return None
