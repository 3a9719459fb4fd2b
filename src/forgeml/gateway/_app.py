"""The gateway's FastAPI app: the routes of contract 5 in front of every deployment.

`POST /v2/models/{deployment}/infer` (and the rest of KServe v2 under it),
`POST /v1/models/{deployment}:predict`, and OpenAI's `/v1/completions`,
`/v1/chat/completions`, `/v1/embeddings` and RAG's `/v1/rag/{index}/query|answer` (the
deployment is the body's `model`) are forwarded unchanged to a replica; `/v1/models` lists
the deployments the key may call.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import Receive, Scope, Send

from forgeml.core.errors import ForgemlError, NotFoundError
from forgeml.core.workspace import Workspace
from forgeml.gateway._keys import VerifiedKey
from forgeml.gateway._lane import ForwardLane
from forgeml.gateway._options import GatewayOptions
from forgeml.gateway._responses import error_response
from forgeml.gateway._service import Gateway, every, model_in_body


class _GatewayApp(FastAPI):
    """The gateway's FastAPI app, with its forward lane in front of all of FastAPI's layers.

    `add_middleware` would put the lane inside the stack FastAPI builds around user
    middleware (ServerErrorMiddleware, exception telemetry, a body limit), and every
    forwarded request would cross those for nothing: the lane answers its own errors and
    limits its own bodies (`read_body`), and uvicorn answers anything unexpected with the
    500 that ServerErrorMiddleware would send. Requests the lane does not forward go
    through `FastAPI.__call__` as before.
    """

    lane: ForwardLane | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.lane is None:
            await super().__call__(scope, receive, send)
        else:
            await self.lane(scope, receive, send)


def create_app(
    workspace: Workspace,
    options: GatewayOptions | None = None,
    rng: random.Random | None = None,
    fast_lane: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """The gateway app over `workspace`'s deployments and keys.

    Args:
        workspace: where deployments, replicas, keys and usage are recorded.
        options: timeouts, limits and intervals (defaults: `GatewayOptions()`).
        rng: the canary split's random source (default: seeded from `options.seed`).
        fast_lane: forward in `ForwardLane`, not through FastAPI's routing (the same
            answers, faster); False only to compare the two.
        clock: monotonic seconds for key-cache expiry, rate limits, circuit breakers and
            route reloads (tests pass a fake one and advance it).
    """
    gateway = Gateway(workspace, options or GatewayOptions(), rng, clock)
    app = _GatewayApp(title="forgeml gateway", lifespan=_lifespan(gateway))
    app.state.gateway = gateway

    @app.exception_handler(ForgemlError)
    async def _forgeml_error(request: Request, error: ForgemlError) -> JSONResponse:
        return error_response(request.url.path, error)

    _add_routes(app, gateway)
    if fast_lane:
        app.lane = ForwardLane(partial(FastAPI.__call__, app), gateway)
    return app


def _lifespan(gateway: Gateway) -> Any:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(gateway.refresh_routes)
        await asyncio.to_thread(gateway.usage.load)
        options = gateway.options
        tasks = [
            asyncio.create_task(every(options.refresh_s, gateway.refresh_routes, "route reload")),
            asyncio.create_task(every(options.usage_flush_s, gateway.usage.flush, "usage flush")),
        ]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with suppress(asyncio.CancelledError):
                    await task
            await gateway.upstreams.close()
            await asyncio.to_thread(gateway.usage.flush)

    return lifespan


def _add_routes(app: FastAPI, gateway: Gateway) -> None:
    # a default, not an Annotated alias: postponed annotations cannot see this local
    authenticated = Depends(gateway.authenticate)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "deployments": len(gateway.routes)}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(gateway.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def openai_models(key: VerifiedKey = authenticated) -> dict[str, Any]:
        routes = gateway.routes
        names = sorted(name for name, route in routes.items() if key.allows(name, route.project))
        return {
            "object": "list",
            "data": [{"id": name, "object": "model", "owned_by": "forgeml"} for name in names],
        }

    @app.api_route("/v2/models/{deployment}", methods=["GET"])
    @app.api_route("/v2/models/{deployment}/{rest:path}", methods=["GET", "POST"])
    async def kserve_v2(
        request: Request, deployment: str, key: VerifiedKey = authenticated
    ) -> Response:
        return await gateway.handle(request, key, deployment)

    @app.post("/v1/models/{target}")
    async def predict(request: Request, target: str, key: VerifiedKey = authenticated) -> Response:
        deployment, _, verb = target.rpartition(":")
        if verb != "predict" or not deployment:
            raise NotFoundError(f"No route {request.url.path}: use /v1/models/NAME:predict.")
        return await gateway.handle(request, key, deployment)

    @app.post("/v1/completions")
    @app.post("/v1/chat/completions")
    @app.post("/v1/embeddings")
    async def openai(request: Request, key: VerifiedKey = authenticated) -> Response:
        return await gateway.handle(request, key, model_in_body)

    @app.post("/v1/rag/{index}/{action}")
    async def rag(
        request: Request, index: str, action: str, key: VerifiedKey = authenticated
    ) -> Response:
        if action not in ("query", "answer"):
            raise NotFoundError(f"No route {request.url.path}: use /v1/rag/INDEX/query or answer.")
        return await gateway.handle(request, key, model_in_body)
