"""Errors in OpenAI's shape `{"error": {"message", "type", "param", "code"}}`, from any route."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel

from forgeml.core.errors import ForgemlError, NotFoundError, RateLimitedError


class ErrorDetail(BaseModel):
    """What went wrong (OpenAI's error object)."""

    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    """Body of every error response of these routes."""

    error: ErrorDetail


# documented in the OpenAPI spec instead of FastAPI's 422: validation errors are a 400 here
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "A bad request, in OpenAI's error shape."},
    "5XX": {"model": ErrorBody, "description": "The model is not ready or failed."},
}


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """An error in OpenAI's shape, typed by `status` (a request or a server error)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> Response:
    """A JSON error response in OpenAI's shape."""
    body = orjson.dumps(error_body(status, message, param, code))
    return Response(body, status_code=status, media_type="application/json")


def _validation_response(error: RequestValidationError) -> Response:
    errors = error.errors()
    if any(item.get("type") == "json_invalid" for item in errors):
        return error_response(400, "The request body is not valid JSON.", None, "invalid_json")
    # a value matching no member of a union fails once per member, each with the member's
    # name appended to the location: report the field once, with every member's reason
    location = [str(part) for part in errors[0].get("loc", ()) if part != "body"]
    related = [item for item in errors if item.get("loc", ())[:2] == errors[0].get("loc", ())[:2]]
    for item in related[1:]:
        other = [str(part) for part in item.get("loc", ()) if part != "body"]
        while location and location != other[: len(location)]:
            location.pop()
    reasons = dict.fromkeys(str(item.get("msg", "is invalid")) for item in related)
    param = ".".join(location) or None
    where = f"'{param}': " if param else "The request body: "
    return error_response(400, where + ", or ".join(reasons) + ".", param)


def _forgeml_response(error: ForgemlError) -> Response:
    message = str(error)
    if isinstance(error, NotFoundError):
        return error_response(404, message, "model", "model_not_found")
    if error.http_status >= 500 or error.http_status in (413, 429):
        response = error_response(error.http_status, message)
        if isinstance(error, RateLimitedError):
            response.headers["Retry-After"] = str(max(1, round(error.retry_after)))
        return response
    # the model cannot do this (e.g. embeddings from a language model): the request's fault
    return error_response(400, message, "model")


class OpenAIRoute(APIRoute):
    """A route whose request and model errors come back in OpenAI's error shape.

    Exception handlers belong to the app, so the mapping happens here instead: these
    routes answer in OpenAI's format whatever app mounts them.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_openai(request: Request) -> Response:
            try:
                return await handle(request)
            except RequestValidationError as error:
                return _validation_response(error)
            except ForgemlError as error:
                return _forgeml_response(error)

        return handle_openai
