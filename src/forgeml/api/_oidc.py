"""OIDC sign-in routes: `GET /api/v1/auth/oidc/login` sends the browser to the identity
provider; `GET /api/v1/auth/oidc/callback` finishes the sign-in (`forgeml.auth.oidc`) and hands
the `Identity` to `on_identity`, which makes the session and answers (accounts' business).

A sign-in's `LoginState` (state, nonce, PKCE verifier) stays on the server in `PendingLogins`,
taken once; the browser holds only the state, in an HttpOnly cookie scoped to these routes,
so a callback URL carried to another browser (login CSRF) does not match that browser's
sign-in. The cookie is SameSite=Lax: the provider's redirect back is a cross-site top-level
navigation, from which Strict would strip it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from forgeml.api._authz import public
from forgeml.auth.oidc import (
    Identity,
    LoginState,
    OidcConfig,
    OidcStateError,
    Resolver,
    finish_login,
    resolve,
    start_login,
)
from forgeml.core.errors import ServiceUnavailableError

PREFIX = "/api/v1/auth/oidc"
COOKIE = "forgeml_oidc_state"


class PendingLogins:
    """Sign-ins started and not yet finished: each taken once, forgotten after `ttl_s`.

    One process's memory: servers behind one address need sticky sessions, or a shared store
    with the same two methods.
    """

    def __init__(
        self, ttl_s: float, clock: Callable[[], float] = time.time, max_pending: int = 10_000
    ) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._max_pending = max_pending
        self._logins: dict[str, LoginState] = {}
        self._lock = threading.Lock()

    def put(self, login: LoginState) -> None:
        """Keep `login` until it is taken or expires.

        Raises:
            ServiceUnavailableError: `max_pending` sign-ins are under way already.
        """
        with self._lock:
            now = self._clock()
            expired = [k for k, v in self._logins.items() if now - v.created_at > self._ttl_s]
            for state in expired:
                del self._logins[state]
            if len(self._logins) >= self._max_pending:
                raise ServiceUnavailableError(
                    "Too many sign-ins are under way; try again in a minute."
                )
            self._logins[login.state] = login

    def take(self, state: str) -> LoginState | None:
        """The sign-in started with `state`, removed; None if unknown, taken or expired."""
        with self._lock:
            login = self._logins.pop(state, None)
        if login is None or self._clock() - login.created_at > self._ttl_s:
            return None
        return login


def oidc_router(
    config: OidcConfig,
    on_identity: Callable[[Identity], Response],
    *,
    pending: PendingLogins | None = None,
    clock: Callable[[], float] = time.time,
    resolver: Resolver = resolve,
) -> APIRouter:
    """The login and callback routes for the provider `config` names.

    Args:
        config: The identity provider and forgeml's client at it.
        on_identity: Makes the session for a verified person and returns the response.
        pending: Where started sign-ins wait; default one in this process's memory.
        clock: The time source for sign-in lifetimes and ID-token checks.
        resolver: Resolves the provider's host for the SSRF checks.
    """
    logins = pending if pending is not None else PendingLogins(config.login_ttl_s, clock)
    secure = urlsplit(config.redirect_uri).scheme == "https"
    router = APIRouter(prefix=PREFIX, tags=["auth"])

    @router.get("/login", dependencies=[public()], status_code=302)
    def login() -> Response:
        """Send the browser to the identity provider to sign in."""
        url, started = start_login(config, clock=clock, resolver=resolver)
        logins.put(started)
        response = RedirectResponse(url, status_code=302)
        response.set_cookie(
            COOKIE,
            started.state,
            max_age=config.login_ttl_s,
            path=PREFIX,
            secure=secure,
            httponly=True,
            samesite="lax",
        )
        return response

    @router.get("/callback", dependencies=[public()])
    def callback(request: Request) -> Response:
        """Finish the sign-in the provider sent the browser back from."""
        state = request.cookies.get(COOKIE)
        if not state:
            raise OidcStateError(
                f"This browser started no sign-in (its cookie is missing); start at {PREFIX}/login."
            )
        started = logins.take(state)
        if started is None:
            raise OidcStateError(
                f"This sign-in is unknown, expired or finished already; start at {PREFIX}/login."
            )
        query = dict(request.query_params)
        identity = finish_login(config, started, query, clock=clock, resolver=resolver)
        response = on_identity(identity)
        response.delete_cookie(COOKIE, path=PREFIX, secure=secure, httponly=True, samesite="lax")
        return response

    return router
