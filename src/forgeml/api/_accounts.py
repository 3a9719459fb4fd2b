"""The accounts authorizer: a bearer token or a session cookie names the caller, whose role
in the request's project, cut to the token's scope, decides the permission.

`Authorization: Bearer fmlt_...` is read first, then the `forgeml_session` cookie a password
sign-in sets (HttpOnly, SameSite=Strict, signed with this install's key). The project is the
resource's own on an item route, else the request's (`_projects.request_project`) for a
partitioned resource's permission or a shared one's read (the queues), else `default`
(`_projects.decision_project`). The
token, the membership and the resource's project are read in one read session. No credential, or
an unknown, malformed, expired or revoked one, or a disabled account: 401. A permission the
caller does not hold there: 403. A change from another origin is refused before any of
this (`_hosts`, CSRF as well as DNS rebinding).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from fastapi import Request, Response

from forgeml.api._authz import Authorizer, Principal, SingleUser
from forgeml.api._projects import decision_project, resource_params, resource_project
from forgeml.auth import (
    AuthSettings,
    Caller,
    PasswordLogin,
    authenticate,
    client_scheme,
    get_auth_settings,
    has_accounts,
    held_in,
    issue_token,
    read_caller,
    session_key,
    sign,
    touch_when_due,
    unsign,
)
from forgeml.core.errors import (
    AuthenticationError,
    InvalidRequestError,
    PermissionDeniedError,
    UsageError,
)
from forgeml.core.workspace import Workspace

SESSION_COOKIE = "forgeml_session"
# how a server decides who may call it: `forgeml server --auth`
AUTH_MODES = ("auto", "accounts", "single-user")


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
        token, from_cookie = self.credential(request)
        caller = self.authenticate(token)
        if from_cookie and caller.via != "session":
            raise AuthenticationError("The session cookie holds no session.")
        return caller

    def credential(self, request: Request) -> tuple[str, bool]:
        """The token `request` carries, and whether it came in the session cookie.

        Raises:
            AuthenticationError: none, or a malformed header or cookie.
        """
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthenticationError("The Authorization header must be 'Bearer <token>'.")
            return token.strip(), False
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie is None:
            raise AuthenticationError(
                "Sign in first: send 'Authorization: Bearer <token>' or the session cookie "
                "of POST /api/v1/auth/login."
            )
        session = unsign(self.session_key, cookie)
        if session is None:
            raise AuthenticationError("The session cookie was not issued by this server.")
        return session, True

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
        token, from_cookie = self.credential(request)
        kind: str | None = getattr(request.state, "resource_kind", None)
        moment = self.clock()
        # one read session for the token, the resource's project and the membership
        with self.workspace.store.read_session() as session:
            caller, last_used = read_caller(session, token, moment)
            if from_cookie and caller.via != "session":
                raise AuthenticationError("The session cookie holds no session.")
            project = decision_project(request, permission)  # after the caller: 401 before 400
            if kind is not None:
                params, home = resource_params(request), self.workspace.settings.home
                found = resource_project(session, kind, params, project, home=home)
                project = found or project
            held = held_in(session, caller, project)
        every = timedelta(seconds=self.settings.token_last_used_every_s)
        touch_when_due(self.workspace, caller, last_used, moment, every)
        if permission not in held:
            raise PermissionDeniedError(
                f"{caller.name} may not {permission} in the project {project!r}."
            )
        request.state.caller = caller
        request.state.permissions = held
        return Principal(caller.name, kind=caller.kind)

    def allows(self, request: Request, permission: str, project: str) -> bool:
        """Whether the caller `authorize` named (else the request's credential's) holds
        `permission` in `project`: its role there, cut to its token's scope, as `authorize`
        decides."""
        caller: Caller | None = getattr(request.state, "caller", None)
        if caller is None:
            caller = self.caller(request)
        with self.workspace.store.read_session() as session:
            return permission in held_in(session, caller, project)


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
