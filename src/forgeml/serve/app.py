"""The model server's ASGI app: KServe v2, `:predict`, OpenAI routes, feedback, explanations,
`/metrics`.

`create_app` is the in-process entry point (models load in the background once the app
starts; `/v2/health/ready` answers 503 until they have); `forgeml serve` loads first and
then builds the app with `build_app`, so a bad reference fails before the port opens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from forgeml.core.errors import PayloadTooLargeError
from forgeml.core.workspace import inside_home
from forgeml.serve import request_ids
from forgeml.serve.errors import error_response, install_error_handlers, protocol_of
from forgeml.serve.feedback import FEEDBACK_SUFFIX
from forgeml.serve.lane import FastLane
from forgeml.serve.metrics import UNKNOWN_MODEL, ServerMetrics
from forgeml.serve.options import ServeOptions
from forgeml.serve.protocols.explain import EXPLAIN_SUFFIX
from forgeml.serve.protocols.kserve_binary import BinaryTensors
from forgeml.serve.repository import ModelRepository
from forgeml.serve.request_ids import RequestIds
from forgeml.serve.request_log import RequestLog

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.serve.protocols.openai import Generated, RecordGeneration

_log = logging.getLogger(__name__)


def create_app(workspace: Workspace, refs: list[str], options: ServeOptions) -> FastAPI:
    """A server app for the models `refs` name (loaded in the background at start-up).

    Args:
        workspace: the registry the references resolve in.
        refs: model references (`NAME`, `NAME@vN`, `NAME@alias`).
        options: batching, runtime, limits and request log options.

    Raises:
        UsageError: no refs, `options.name` with several refs, duplicate served names, or
            a log path outside FORGEML_HOME.
    """
    if options.log_path is not None:  # refused before any model is resolved or loaded
        inside_home(Path(workspace.settings.home), options.log_path, "request log")
    return build_app(ModelRepository(workspace, refs, options))


def build_app(
    repository: ModelRepository,
    fast_lane: bool = True,
    extra_routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """The app over `repository`; models not yet loaded load when the app starts.

    Args:
        repository: the models to serve.
        fast_lane: answer `:predict` and v2 `infer` in `FastLane`, not through FastAPI's
            routing (the same answers, faster); False only to compare the two.
        extra_routers: routes a layer above serving adds (`forgeml serve --rag` adds
            RAG's); they get the app's error handlers and body limit, and the fast lane
            passes them by.
    """
    from forgeml import __version__
    from forgeml.serve.protocols import explain, feedback, kserve_v2, openai, predict

    options = repository.options

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        repository.metrics.watch_gc()
        repository.start(load=not repository.ready)
        try:
            yield
        finally:
            repository.close()
            repository.metrics.unwatch_gc()
            app.state.request_log.close()

    app = FastAPI(title="forgeml model server", version=__version__, lifespan=lifespan)
    app.state.repository = repository
    app.state.request_log = _request_log(repository)
    install_error_handlers(app)
    app.include_router(kserve_v2.router(repository, __version__))
    app.include_router(predict.router(repository))
    record = _generation_record(repository, app.state.request_log)
    app.include_router(openai.router(repository, record, options.max_tool_calls))
    app.include_router(feedback.router(repository))
    app.include_router(explain.router(repository))
    for extra in extra_routers:
        app.include_router(extra)

    @app.get("/metrics", tags=["metrics"])
    async def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(repository.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    if fast_lane:  # innermost: the metrics and the body limit still see its requests
        app.add_middleware(FastLane, repository=repository, log=app.state.request_log)
    app.add_middleware(BinaryTensors)  # v2 binary tensor data in and out; JSON inside it
    app.add_middleware(_RequestMetrics, metrics=repository.metrics, models=set(repository.models))
    app.add_middleware(_BodyLimit, max_bytes=options.max_body_bytes)
    return app


def _generation_record(repository: ModelRepository, log: RequestLog) -> RecordGeneration | None:
    """How the OpenAI routes offer a generation to the request log (None: it keeps none)."""
    if not log.enabled:
        return None

    def record(generated: Generated) -> None:
        # the version that generated it: loaded, as it just answered
        version = repository.get(generated.model).ready_model().ref
        log.record(
            generated.model,
            version,
            "openai",
            generated.instances,
            generated.outputs,
            generated.request_id,
            prompt=generated.prompt,
        )

    return record


def _request_log(repository: ModelRepository) -> RequestLog:
    options = repository.options
    home = Path(repository.workspace.settings.home)
    default = home / "logs" / "requests" / f"{'+'.join(repository.models)}.jsonl"
    path = inside_home(home, options.log_path, "request log") if options.log_path else default
    return RequestLog(path, options.log_sample_rate, options.log_redact)


class _BodyLimit:
    """413 for a body over `max_bytes`, by Content-Length or while it streams in.

    Also reads a body without a Content-Type as JSON, as Triton does (tritonclient sends
    none), and an inference request's body as JSON whatever its Content-Type says, as TF
    Serving does (curl -d sends application/x-www-form-urlencoded): FastAPI would otherwise
    not parse it. A body that is not JSON then gets the 400 that says so.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        content_type = headers.get(b"content-type")
        if content_type is None or (content_type != b"application/json" and _is_inference(scope)):
            declared_json = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope = {**scope, "headers": [*declared_json, (b"content-type", b"application/json")]}
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            message = self._message()
            await error_response(scope["path"], 413, message)(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                # an HTTPException, as FastAPI turns others raised while reading into a 400
                raise HTTPException(PayloadTooLargeError.http_status, self._message())
            return message

        await self.app(scope, counted, send)

    def _message(self) -> str:
        return f"The request body is over this server's limit of {self.max_bytes} bytes."


def _is_inference(scope: Scope) -> bool:
    """A POST to `:predict` or a v2 route (whose bodies are JSON or v2 binary tensors)."""
    return scope["method"] == "POST" and protocol_of(scope["path"]) in ("predict", "v2")


class _RequestMetrics:
    """Counts and times inference requests per model and protocol, and gives each its id.

    The id (`forgeml.serve.request_ids`) is put in the scope on the way in, for the
    answer and the request log, and sent back as `x-request-id` on the way out, errors
    included. Feedback posts get an id too but are not counted as inference requests.
    """

    def __init__(self, app: ASGIApp, metrics: ServerMetrics, models: set[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.models = models
        self.ids = RequestIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        protocol = protocol_of(path)
        inference = scope["type"] == "http" and scope["method"] == "POST" and protocol != "other"
        if not inference:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        scope[request_ids.SCOPE_KEY] = request_ids.incoming(scope["headers"]) or self.ids.mint()

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                header = (request_ids.HEADER, scope[request_ids.SCOPE_KEY].encode("latin-1"))
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        if path.endswith((FEEDBACK_SUFFIX, EXPLAIN_SUFFIX)):  # not inference: not timed
            await self.app(scope, receive, watched)
            return
        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, watched)
        finally:
            self.metrics.in_flight.dec()
            name = _model_label(scope, self.models)
            self.metrics.observe_request(name, protocol, status, time.perf_counter() - started)


def _model_label(scope: Scope, models: set[str]) -> str:
    params: dict[str, Any] = scope.get("path_params") or {}
    state: dict[str, Any] = scope.get("state") or {}
    name = params.get("name") or state.get("model")
    return name if isinstance(name, str) and name in models else UNKNOWN_MODEL
