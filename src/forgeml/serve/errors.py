"""Errors as each protocol spells them, decided in one place for the whole app.

| cause | status |
|---|---|
| body is not JSON | 400 |
| JSON of the wrong shape, wrong datatype or shape, missing or extra feature | 422 |
| unknown model or route | 404 |
| body over `max_body_bytes` | 413 |
| model not loaded (yet) | 503 |

KServe v2 and `:predict` bodies are `{"error": "..."}` (the Open Inference Protocol's);
OpenAI routes answer `{"error": {"message", "type", "param", "code"}}` (OpenAI's), with
400 for every invalid request as OpenAI does. Any other exception is a bug: 500, logged.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from forgeml.core.errors import ForgemlError, RateLimitedError

Protocol = Literal["v2", "predict", "openai", "other"]
_OPENAI_PATHS = ("/v1/models", "/v1/embeddings", "/v1/completions", "/v1/chat/completions")
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable_error",
}
_log = logging.getLogger(__name__)


def protocol_of(path: str) -> Protocol:
    """Which protocol a request path belongs to."""
    if path.startswith("/v2/"):
        return "v2"
    if path.startswith("/v1/models/") and path.endswith(":predict"):
        return "predict"
    if path.startswith(_OPENAI_PATHS):
        return "openai"
    return "other"


def error_response(path: str, status: int, message: str, headers: Any = None) -> Response:
    """A JSON error response in the protocol of `path`."""
    body: dict[str, Any]
    if protocol_of(path) == "openai":
        kind = _OPENAI_TYPES.get(status, "server_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    else:
        body = {"error": message}
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def _validation_message(problems: list[Any]) -> tuple[int, str]:
    first = problems[0] if problems else {}
    if first.get("type") == "json_invalid":
        return 400, "The request body is not valid JSON."
    # "[" marks pydantic's label of a union's member (`dict[str,list[any]]`), not a place
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    where = ".".join(part for part in loc if "[" not in part)
    message = str(first.get("msg", "invalid request"))
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return 422, f"Invalid request at '{where or 'body'}': {message}{more}."


def response_for(path: str, error: Exception) -> Response:
    """The protocol's answer to `error`, raised while serving a request to `path`.

    A forgeml error answers its own status (429 with Retry-After); a request that fails
    validation 400 (not JSON) or 422 (400 on OpenAI routes); an HTTP exception its status;
    anything else is a bug: 500, logged.
    """
    if isinstance(error, ForgemlError):
        headers = None
        if isinstance(error, RateLimitedError):
            headers = {"Retry-After": str(max(1, round(error.retry_after)))}
        return error_response(path, error.http_status, str(error), headers)
    if isinstance(error, RequestValidationError | ValidationError):
        status, message = _validation_message(list(error.errors()))
        return error_response(path, 400 if protocol_of(path) == "openai" else status, message)
    if isinstance(error, HTTPException):
        headers = getattr(error, "headers", None)
        return error_response(path, error.status_code, str(error.detail), headers)
    _log.exception("unexpected error serving %s", path, exc_info=error)
    return error_response(path, 500, "Internal server error; see the server log.")


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error in the protocol of the request's path."""

    async def answer(request: Request, error: Exception) -> Response:
        return response_for(request.url.path, error)

    for kind in (ForgemlError, RequestValidationError, HTTPException, Exception):
        app.add_exception_handler(kind, answer)
