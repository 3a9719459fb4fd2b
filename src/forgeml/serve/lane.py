"""The fast lane: `:predict` and v2 `infer` answered without FastAPI's routing machinery.

For each request FastAPI tries every route's pattern, builds a `Request`, solves the
route's dependencies and parses the JSON twice (`json`, then pydantic): about 0.2 ms on
this project's 2-core reference machine, as long as the Adult MLP's own forward pass. The
lane recognises the two inference paths by their prefix and suffix, reads the body,
validates it from JSON with the routes' own pydantic models, and calls the same `answer`
functions the routes call; errors get `response_for`, which the app's error handlers
use too. Anything else (other routes, a body not declared `application/json`, which the
app's body limit declares for every inference request) goes through FastAPI, and the
routes stay in the app, so the OpenAPI document still lists them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from forgeml.serve.errors import response_for
from forgeml.serve.protocols import kserve_v2, predict
from forgeml.serve.protocols._common import json_response, read_body
from forgeml.serve.repository import ModelRepository
from forgeml.serve.request_ids import request_id_of, set_request_id, usable
from forgeml.serve.request_log import RequestLog

# answer(repository, model name, validated body, request log, request id) -> response payload
Answer = Callable[[ModelRepository, str, Any, RequestLog | None, str], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class _Route:
    """A `POST` route with a `{name}` in its path: the body it takes and what answers it."""

    template: str  # the FastAPI route's own path, e.g. "/v1/models/{name}:predict"
    body: type[BaseModel]
    answer: Answer

    @cached_property
    def _around(self) -> tuple[str, str]:
        """What comes before and after `{name}` in the template."""
        prefix, _, suffix = self.template.partition("{name}")
        return prefix, suffix

    def name_in(self, path: str) -> str | None:
        """The model name in `path`, or None if `path` is not this route's."""
        prefix, suffix = self._around
        if not (path.startswith(prefix) and path.endswith(suffix)):
            return None
        name = path[len(prefix) : len(path) - len(suffix)]
        return name if name and "/" not in name else None  # as FastAPI's `{name}` matches


_ROUTES = (
    _Route(predict.PATH, predict.PredictRequest, predict.answer),
    _Route(kserve_v2.INFER_PATH, kserve_v2.InferRequest, kserve_v2.answer),
)


class FastLane:
    """ASGI middleware answering the inference routes of `repository` itself."""

    def __init__(self, app: ASGIApp, repository: ModelRepository, log: RequestLog | None) -> None:
        self.app = app
        self.repository = repository
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = _match(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        route, name = found
        scope["path_params"] = {"name": name}  # the request metrics label by it
        path = scope["path"]
        try:
            body = await read_body(receive)
            if body is None:  # the client went away before sending all of it
                return
            request = route.body.model_validate_json(body)
            request_id = request_id_of(scope)
            answer = await route.answer(self.repository, name, request, self.log, request_id)
            if answer.get("id", request_id) != request_id and usable(answer["id"]):
                set_request_id(scope, answer["id"])  # a v2 body's own id answers for it
            response = json_response(answer)
        except Exception as error:  # every error is answered as the app's handlers do
            response = response_for(path, error)
        await response(scope, receive, send)


def _match(scope: Scope) -> tuple[_Route, str] | None:
    if scope["type"] != "http" or scope["method"] != "POST" or not _declares_json(scope):
        return None
    for route in _ROUTES:
        name = route.name_in(scope["path"])
        if name is not None:
            return route, name
    return None


def _declares_json(scope: Scope) -> bool:
    for key, value in scope["headers"]:
        if key == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == b"application/json")
    return False
