"""The accounts authorizer: a bearer token or a session cookie names the caller, whose role
in the request's project, cut to the token's scope, decides the permission.

`Authorization: Bearer fmlt_...` is read first, then the `forgeml_session` cookie a password
sign-in sets (HttpOnly, SameSite=Strict, signed with this install's key). The project is the
route's `{project}`, else a declared `project` query parameter, else `default`. No credential, or
an unknown, malformed, expired or revoked one, or a disabled account: 401. A permission the
caller does not hold there: 403. A change from another origin is refused before any of
this (`_hosts`, CSRF as well as DNS rebinding).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from fastapi import Request, Response

from forgeml.api._authz import Authorizer, Principal, SingleUser
from forgeml.auth import (
    DEFAULT_PROJECT,
    AuthSettings,
    Caller,
    PasswordLogin,
    authenticate,
    client_scheme,
    get_auth_settings,
    has_accounts,
    issue_token,
    permissions_in,
    session_key,
    sign,
    unsign,
)
from forgeml.core.errors import (
    AuthenticationError,
    InvalidRequestError,
    PermissionDeniedError,
    UsageError,
)
from forgeml.core.ids import validate_name
from forgeml.core.workspace import Workspace

SESSION_COOKIE = "forgeml_session"
# how a server decides who may call it: `forgeml server --auth`
AUTH_MODES = ("auto", "accounts", "single-user")


def request_project(request: Request) -> str:
    """The project a request acts in (InvalidNameError for a malformed one): the route's
    `{project}`, else a `project` query parameter where the route declares one, else
    `default`.

    Resources (datasets, runs, models, jobs, ...) carry no project yet: they all live in
    `default`, so a resource route ignores `?project=`: honouring it let a member of any
    other project read and change every resource by naming their own project.
    """
    project = request.path_params.get("project")
    if project is None and _declares_project_query(request):
        project = request.query_params.get("project")
    return validate_name(project, "project") if project else DEFAULT_PROJECT


def _declares_project_query(request: Request) -> bool:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    return dependant is not None and any(
        param.name == "project" for param in dependant.query_params
    )


class AccountsAuthorizer:
    """Tokens and sessions of the workspace's accounts decide each request."""

    def __init__(
        self,
        workspace: Workspace,
        settings: AuthSettings | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.workspace = workspace
        self.settings = settings or get_auth_settings()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.login = PasswordLogin(workspace, self.settings)
        self.session_key = session_key(workspace, self.settings)

    def caller(self, request: Request) -> Caller:
        """Who sent `request`, from its bearer token or session cookie.

        Raises:
            AuthenticationError: no usable credential.
        """
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthenticationError("The Authorization header must be 'Bearer <token>'.")
            return self.authenticate(token.strip())
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie is None:
            raise AuthenticationError(
                "Sign in first: send 'Authorization: Bearer <token>' or the session cookie "
                "of POST /api/v1/auth/login."
            )
        session = unsign(self.session_key, cookie)
        if session is None:
            raise AuthenticationError("The session cookie was not issued by this server.")
        caller = self.authenticate(session)
        if caller.via != "session":
            raise AuthenticationError("The session cookie holds no session.")
        return caller

    def authenticate(self, token: str, *, now: datetime | None = None) -> Caller:
        """The caller `token` stands for, at `now` (default: the clock); see
        `forgeml.auth.authenticate`."""
        every = timedelta(seconds=self.settings.token_last_used_every_s)
        return authenticate(self.workspace, token, now=now or self.clock(), touch_every=every)

    def set_session_cookie(self, response: Response, token: str, *, secure: bool) -> None:
        """Put session `token`, signed, in `response`'s cookie (HttpOnly, SameSite=Strict;
        Secure when the server is reached over https)."""
        response.set_cookie(
            SESSION_COOKIE,
            sign(self.session_key, token),
            max_age=int(self.settings.session_hours * 3600),
            httponly=True,
            samesite="strict",
            secure=secure,
            path="/",
        )

    def open_session(self, response: Response, user: str, *, secure: bool) -> Caller:
        """Sign account `user` in (after an OIDC sign-in proved who it is): a session like a
        password sign-in's, its cookie set on `response`.

        Raises:
            AuthenticationError: the account is disabled.
        """
        lifetime = timedelta(hours=self.settings.session_hours)
        now = self.clock()
        try:
            _, token = issue_token(
                self.workspace, user, "session", actor=user,
                expires_in=lifetime, kind="session", now=now,
            )  # fmt: skip
        except InvalidRequestError:
            raise AuthenticationError(f"The account {user!r} is disabled.") from None
        self.set_session_cookie(response, token, secure=secure)
        return self.authenticate(token, now=now)

    def authorize(self, request: Request, permission: str) -> Principal:
        caller = self.caller(request)
        project = request_project(request)
        held = permissions_in(self.workspace, caller, project)
        if permission not in held:
            raise PermissionDeniedError(
                f"{caller.name} may not {permission} in the project {project!r}."
            )
        request.state.caller = caller
        request.state.permissions = held
        return Principal(caller.name, kind=caller.kind)


def request_scheme(request: Request) -> str:
    """The scheme the client used: the connection's, or a trusted proxy's
    `X-Forwarded-Proto` (a proxy ending TLS speaks http to this server)."""
    peer = request.client.host if request.client else None
    return client_scheme(
        peer, request.url.scheme, request.headers, request.app.state.trusted_proxies
    )


def choose_authorizer(
    workspace: Workspace, mode: str = "auto", settings: AuthSettings | None = None
) -> Authorizer:
    """The authorizer of a server over `workspace`: `accounts` (every caller signs in),
    `single-user` (the embedded default: the local person, no login), or `auto` (accounts
    as soon as one exists, decided when the server starts).

    Raises:
        UsageError: an unknown mode, or `accounts` while the workspace has none.
    """
    if mode not in AUTH_MODES:
        raise UsageError(f"Unknown auth mode {mode!r}: use one of {', '.join(AUTH_MODES)}.")
    if mode == "single-user" or (mode == "auto" and not has_accounts(workspace)):
        return SingleUser(workspace.actor)
    if not has_accounts(workspace):
        raise UsageError(
            "No account exists to sign in with: create one first "
            "(forgeml users create NAME --role owner)."
        )
    return AccountsAuthorizer(workspace, settings)
