"""Errors on pages are pages: a sign-in needed is a redirect to `/login`, any other error a
page with its one sentence and status. Under `/api/` the API's JSON answer stands."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from forgeml.core.errors import AuthenticationError, ForgemlError
from forgeml.ui._render import render
from forgeml.ui._security import NOT_PAGES

Handler = Callable[[Request, Exception], Awaitable[Response] | Response]


def page_errors(app: FastAPI) -> None:
    """Wrap `app`'s error handlers (the API's) so that page requests get pages."""
    for kind in (ForgemlError, StarletteHTTPException, RequestValidationError):
        app.add_exception_handler(kind, _for_pages(app.exception_handlers[kind]))


def _for_pages(api_handler: Handler) -> Handler:
    async def handle(request: Request, error: Exception) -> Response:
        answer = api_handler(request, error)
        response = answer if isinstance(answer, Response) else await answer
        if request.url.path.startswith((*NOT_PAGES, "/static/")):
            return response
        if isinstance(error, AuthenticationError) and request.method == "GET":
            return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
        sentence = response.body.decode() if isinstance(response.body, bytes) else ""
        return render(
            request,
            "error.html",
            status_code=response.status_code,
            message=_sentence(sentence),
            status=response.status_code,
        )

    return handle


def _sentence(body: str) -> str:
    """The API answer's one sentence (`{"error": ...}`)."""
    try:
        return str(orjson.loads(body).get("error", "The request was refused."))
    except (orjson.JSONDecodeError, AttributeError):
        return "The request was refused."
