"""What every page answer carries, and the CSRF token every change a page sends must carry.

The Content-Security-Policy allows scripts, styles and fetches from this server only: no
inline script runs (chart data travels in `<script type="application/json">` blocks that the
static `app.js` reads), no plugin loads, no other site frames a page (clickjacking).

CSRF is a double submit (OWASP's CSRF cheat sheet): the first answer sets a random token in
the `forgeml_csrf` cookie (HttpOnly, SameSite=Strict); each page names it in a `<meta>` tag,
htmx sends it back in the `X-CSRF-Token` header (`hx-headers` on `<body>`) and a plain form
in its `csrf_token` field. A page's change whose token is missing or differs from the
cookie's is refused (403) before anything runs: another site can neither read the token nor
set the cookie. The API's own routes keep their own guard (`forgeml.api._hosts`: a change
from another origin is refused) and bearer tokens, which no browser sends by itself.

The same middleware hands a page route the project its browser chose (`_projects`): a
well-formed `forgeml_project` cookie becomes `request.state.page_project`, a malformed one
is ignored; outside the pages (`NOT_PAGES`) it is never read.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qs

from fastapi import Request
from starlette.datastructures import MutableHeaders
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from forgeml.api._projects import PAGE_PROJECT
from forgeml.core.errors import InvalidNameError, PermissionDeniedError
from forgeml.core.ids import validate_name

CSRF_COOKIE = "forgeml_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
PROJECT_COOKIE = "forgeml_project"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'; "
    "base-uri 'self'; form-action 'self'"
)
_PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
# what the API serves (its routes; FastAPI's OpenAPI document and its docs pages, which
# load Swagger UI's scripts as FastAPI writes them): left as the API answers it
NOT_PAGES = ("/api/", "/openapi.json", "/docs", "/redoc")


class PageSecurity:
    """ASGI middleware: every page's answer (outside `NOT_PAGES`) carries `_PAGE_HEADERS`; a browser
    without a CSRF cookie gets one, and its token is `request.state.csrf` for the page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(NOT_PAGES):
            await self.app(scope, receive, send)
            return
        held = _cookie(scope, CSRF_COOKIE)
        fresh = held is None or len(held) < 32
        token = secrets.token_urlsafe(32) if fresh or held is None else held
        state = scope.setdefault("state", {})
        state["csrf"] = token
        state[PAGE_PROJECT] = chosen_project(_cookie(scope, PROJECT_COOKIE))
        secure = scope.get("scheme") == "https"

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _PAGE_HEADERS.items():
                    headers[name] = value
                if fresh:
                    headers.append("Set-Cookie", _csrf_cookie(token, secure=secure))
            await send(message)

        await self.app(scope, receive, send_secured)


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            return cookie_parser(value.decode("latin-1")).get(name)
    return None


def chosen_project(cookie: str | None) -> str | None:
    """The project a `forgeml_project` cookie names, or None when there is none or it is no
    project name (a malformed cookie is ignored, never an error on every page)."""
    if not cookie:
        return None
    try:
        return validate_name(cookie, "project")
    except InvalidNameError:
        return None


def local_path(target: str | None) -> str:
    """`target` when it is a path of this server, else `/` (no open redirect)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


def _csrf_cookie(token: str, *, secure: bool) -> str:
    cookie = f"{CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    return cookie + "; Secure" if secure else cookie


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of a URL-encoded form body (the first value of each)."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    body = (await request.body()).decode("utf-8", "replace")
    return {name: values[0] for name, values in parse_qs(body).items()}


async def csrf_checked(request: Request) -> None:
    """A page-route dependency: the change carries the CSRF token of this browser's cookie.

    Raises:
        PermissionDeniedError: the token is missing or is not the cookie's.
    """
    expected = request.cookies.get(CSRF_COOKIE)
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        sent = (await form_fields(request)).get(CSRF_FIELD)
    if not expected or not sent or not hmac.compare_digest(expected, sent):
        raise PermissionDeniedError(
            "The form's CSRF token is missing or stale: reload the page and try again."
        )
