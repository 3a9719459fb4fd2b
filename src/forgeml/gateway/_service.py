"""The gateway's state and the hot path: authenticate, admit, route, forward, count."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from forgeml.core.errors import (
    AuthenticationError,
    ColdStartTimeoutError,
    ForgemlError,
    InvalidDataError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
)
from forgeml.core.workspace import Workspace
from forgeml.gateway._auth import KeyCache, presented_key
from forgeml.gateway._keys import VerifiedKey
from forgeml.gateway._limits import RateLimiter, check_quota
from forgeml.gateway._options import GatewayOptions
from forgeml.gateway._prompts import FIELD, PATHS, PromptResolver
from forgeml.gateway._proxy import Forwarded, Outgoing, Upstreams, request_headers
from forgeml.gateway._responses import UNAUTHENTICATED, GatewayMetrics
from forgeml.gateway._routing import Route, load_routes
from forgeml.gateway._usage import UsageRecorder
from forgeml.serve.prompt_refs import HEADER as PROMPT_HEADER

log = logging.getLogger(__name__)
# an unknown deployment name reloads the routes at most this often (new deployments show
# up at once; a flood of bad names does not hammer the store)
_MISS_RELOAD_S = 1.0
# how often a cold start re-reads the routes while it waits for a replica
_WAKE_POLL_S = 0.2
# a retry after a cold start ran out may find the replica it asked for ready by then
_COLD_RETRY_AFTER_S = 5.0


class Gateway:
    """Keys, limits, routes, upstream connections and usage of one gateway process."""

    def __init__(
        self,
        workspace: Workspace,
        options: GatewayOptions,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workspace = workspace
        self.options = options
        # one clock for every deadline: key cache TTL, rate buckets, breakers, route reloads
        self.clock = clock
        self.keys = KeyCache(workspace, options.key_cache_ttl_s, clock)
        self.limiter = RateLimiter(clock)
        self.usage = UsageRecorder(workspace)
        self.metrics = GatewayMetrics()
        self.rng = rng or random.Random(options.seed)
        # a prompt's split draws from the same seeded source as the canary split
        self.prompts = PromptResolver(workspace, options.prompt_cache_ttl_s, clock, self.rng)
        self.routes: dict[str, Route] = {}
        self.routes_loaded = 0.0
        self.upstreams = Upstreams(options, clock)
        self._verifying: dict[str, asyncio.Future[VerifiedKey]] = {}
        self._waking: dict[str, asyncio.Future[Route]] = {}

    def refresh_routes(self) -> None:
        """Reload the route table from the store (blocking)."""
        routes = load_routes(self.workspace)
        self.routes, self.routes_loaded = routes, self.clock()

    async def authenticate(self, request: Request) -> VerifiedKey:
        """The key of `request`; a refusal is counted in the metrics before it is raised.

        Raises:
            AuthenticationError: no key, or an unknown/revoked one.
        """
        started = time.perf_counter()
        try:
            return await self._verified_key(request)
        except AuthenticationError as error:
            # deployment "-": the caller is unknown, so its path must not mint label values
            self.metrics.observe("-", UNAUTHENTICATED, error.http_status, started)
            raise

    async def _verified_key(self, request: Request) -> VerifiedKey:
        """The key of `request`, from the cache or verified off the event loop."""
        headers = request.headers
        presented = presented_key(headers.get("authorization"), headers.get("x-api-key"))
        cached = self.keys.cached(presented)
        if cached is not None:
            return cached
        # single flight: concurrent requests with one expired key share one KDF run
        pending = self._verifying.get(presented)
        if pending is None:
            pending = asyncio.ensure_future(asyncio.to_thread(self.keys.verify, presented))
            self._verifying[presented] = pending
            pending.add_done_callback(lambda _: self._verifying.pop(presented, None))
        return await asyncio.shield(pending)

    async def known_route(self, deployment: str) -> Route:
        """The route of `deployment` as the table has it (no cold start waited for).

        Raises:
            NotFoundError: no such deployment.
        """
        found = self.routes.get(deployment)
        if found is None and self.clock() - self.routes_loaded > _MISS_RELOAD_S:
            await asyncio.to_thread(self.refresh_routes)
            found = self.routes.get(deployment)
        if found is None:
            raise NotFoundError(f"No deployment named {deployment!r}.")
        return found

    async def cold_start(self, deployment: str) -> Route:
        """The route of autoscaled `deployment` once a replica of it is ready.

        The wait is shared by every request for the deployment (single flight).

        Raises:
            ColdStartTimeoutError: no replica was ready within `cold_start_timeout_s`.
            NotFoundError: the deployment was deleted meanwhile.
        """
        pending = self._waking.get(deployment)
        if pending is None:
            pending = asyncio.ensure_future(self._wake(deployment))
            self._waking[deployment] = pending
            pending.add_done_callback(lambda _: self._waking.pop(deployment, None))
        return await asyncio.shield(pending)

    async def _wake(self, deployment: str) -> Route:
        """Ask the server's autoscaler for a replica (a `wanted` row in the store: the
        loop in `forgeml server` owns every replica process) and wait until one is routed."""
        from forgeml.serve.deployments import request_replica

        started = time.perf_counter()
        timeout_s = self.options.cold_start_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    # again each round: a replica that failed to start is asked for anew
                    await asyncio.to_thread(request_replica, self.workspace, deployment)
                    await asyncio.to_thread(self.refresh_routes)
                    found = self.routes.get(deployment)
                    if found is None:
                        raise NotFoundError(f"No deployment named {deployment!r}.")
                    if found.serving:
                        self.metrics.cold_start.labels(deployment).observe(
                            time.perf_counter() - started
                        )
                        return found
                    await asyncio.sleep(_WAKE_POLL_S)
        except TimeoutError:
            raise ColdStartTimeoutError(
                f"Deployment {deployment!r} is scaled to zero and no replica was ready within "
                f"{timeout_s:g} s; is `forgeml server` running? Retry later.",
                retry_after=_COLD_RETRY_AFTER_S,
            ) from None

    async def handle(
        self, request: Request, key: VerifiedKey, deployment: str | Callable[[bytes], str]
    ) -> Response:
        """Admit, forward and count one request (`deployment` may be read from the body)."""
        started = time.perf_counter()
        name = deployment if isinstance(deployment, str) else "-"
        prompt = None
        try:
            body = await read_body(request, self.options.max_body_bytes)
            name, payload = _target(request.scope["path"], deployment, body)
            if not key.scoped(name):  # out of scope: refused before any lookup
                raise _not_allowed(key, name)
            # the cached route table's project: no store read on the hot path
            route = await self.known_route(name)
            if not key.allows(name, route.project):
                raise _not_allowed(key, name)
            check_quota(key, self.usage.requests_today(key.id))
            self.limiter.check(key)
            if payload is not None and FIELD in payload:
                path = request.scope["path"]
                body, prompt = await self.prompts.apply(payload, path, route.project)
            if route.cold_starts and not route.serving:
                route = await self.cold_start(name)
                if not key.allows(name, route.project):  # moved while it woke
                    raise _not_allowed(key, name)
        except ForgemlError as error:
            self.usage.record(key.id, name, forwarded=False, error=False, latency_ms=0.0)
            self.metrics.observe("-", key.prefix, error.http_status, started)
            raise
        return await self._forward(request, key, route, body, started, prompt)

    async def _forward(
        self,
        request: Request,
        key: VerifiedKey,
        route: Route,
        body: bytes,
        started: float,
        prompt: str | None = None,
    ) -> Response:
        scope = request.scope
        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        headers = request_headers(request.headers.items())
        if prompt is not None:  # the version the gateway rendered, not one the caller claims
            headers = [(k, v) for k, v in headers if k.lower() != PROMPT_HEADER]
            headers.append((PROMPT_HEADER, prompt))
        outgoing = Outgoing(request.method, target.decode("latin-1"), headers, body)
        for replica in route.shadow:
            self.upstreams.shadow(replica, outgoing)
        _, candidates = route.candidates(self.rng)
        try:
            answer = await self.upstreams.forward(route.name, candidates, outgoing)
        except ForgemlError as error:
            self._count(key, route.name, error.http_status, started)
            raise
        self._count(key, route.name, answer.status, started)
        if prompt is not None:
            answer.headers.append((PROMPT_HEADER, prompt))
        return _response(answer)

    def _count(self, key: VerifiedKey, deployment: str, status: int, started: float) -> None:
        latency_ms = (time.perf_counter() - started) * 1000.0
        self.usage.record(
            key.id, deployment, forwarded=True, error=status >= 500, latency_ms=latency_ms
        )
        self.metrics.observe(deployment, key.prefix, status, started)


def _not_allowed(key: VerifiedKey, deployment: str) -> PermissionDeniedError:
    # one answer whether the deployment is out of the key's scopes or of its project
    return PermissionDeniedError(
        f"API key {key.prefix} is not allowed to call deployment {deployment!r}."
    )


def _response(answer: Forwarded) -> Response:
    if answer.stream is None:
        return Response(answer.body, status_code=answer.status, headers=dict(answer.headers))
    return StreamingResponse(
        answer.stream.chunks,
        status_code=answer.status,
        headers=dict(answer.headers),
        background=BackgroundTask(answer.stream.close),
    )


def _target(
    path: str, deployment: str | Callable[[bytes], str], body: bytes
) -> tuple[str, dict[str, Any] | None]:
    """The deployment to call, and the parsed body when it may hold a registry prompt.

    A body read for its `model` is parsed once either way (as `model_in_body` does); a
    generation request's parsed body is kept, for `handle` to look up the prompt field in.
    """
    if isinstance(deployment, str):
        return deployment, None
    if path in PATHS:
        payload = _payload(body)
        return _model(payload), payload
    return deployment(body), None


def model_in_body(body: bytes) -> str:
    """The OpenAI request's `model`: the deployment to call.

    Raises:
        InvalidDataError: the body is not JSON or names no model.
    """
    return _model(_payload(body))


def _payload(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise InvalidDataError(f"The request body is not valid JSON: {error}.") from error


def _model(payload: Any) -> str:
    model = payload.get("model") if isinstance(payload, dict) else None
    if not isinstance(model, str) or not model:
        raise InvalidDataError("The request body needs 'model': the name of a deployment.")
    return model


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused as soon as it passes `limit` bytes.

    Raises:
        PayloadTooLargeError: the body (declared or received) is over `limit`.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"The request body is over the gateway's {limit}-byte limit.")


async def every(seconds: float, work: Callable[[], object], what: str) -> None:
    """Run blocking `work` off the event loop every `seconds`, logging (not dying on) errors."""
    while True:
        await asyncio.sleep(seconds)
        try:
            await asyncio.to_thread(work)
        except Exception:  # a store hiccup must not stop the loop; the next round retries
            log.exception("gateway: %s failed", what)
