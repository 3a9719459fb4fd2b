"""Account routes: sign in and out, the caller's own account and tokens, users, projects
and their members, others' tokens.

Every body forbids unknown fields (422 naming the field): nothing can be mass-assigned
(ZenML CVE-2024-25723, CVE-2024-2035, CVE-2024-2213: a user updating themselves into an
admin or back into an enabled account). Changing, or minting a token for, another account
needs at least every permission that account holds, in every project it is a member of.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from forgeml import auth
from forgeml.api._accounts import (
    SESSION_COOKIE,
    AccountsAuthorizer,
    request_scheme,
)
from forgeml.api._authz import Principal, public, require
from forgeml.api._json import CliRouter
from forgeml.api._projects import decision_project, request_project
from forgeml.auth import Caller
from forgeml.auth.roles import check_role
from forgeml.core.errors import AuthenticationError, InvalidRequestError, PermissionDeniedError
from forgeml.core.workspace import Workspace

# answers in the CLI's JSON, so `forgeml users|projects|tokens` print them unchanged
router = CliRouter(prefix="/api/v1")
Name = Annotated[str, Field(min_length=1, max_length=128)]
Password = Annotated[str, Field(min_length=1, max_length=1024)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Login(_Body):
    name: Name = Field(description="The account's name.")
    password: Password = Field(description="Its password.")


class OwnUpdate(_Body):
    email: str | None = Field(default=None, max_length=320, description="A new e-mail address.")
    password: Password | None = Field(default=None, description="A new password.")
    current_password: Password | None = Field(
        default=None, description="The password now (needed to set a new one)."
    )


class NewUser(_Body):
    name: Name = Field(description="The account's name.")
    kind: str = Field(default="user", pattern="^(user|service)$", description="user or service.")
    email: str | None = Field(default=None, max_length=320)
    password: Password | None = Field(default=None, description="A person's password.")
    role: str | None = Field(default=None, description="A role in the request's project.")


class UserUpdate(_Body):
    disabled: bool | None = Field(default=None, description="Disable or enable the account.")
    email: str | None = Field(default=None, max_length=320)
    password: Password | None = Field(default=None, description="A new password.")


class NewProject(_Body):
    name: Name = Field(description="The project's name.")


class Membership(_Body):
    role: str = Field(description="owner, admin, maintainer, developer or viewer.")


class NewToken(_Body):
    name: Name = Field(description="A label for people.")
    scopes: list[str] | None = Field(
        default=None, max_length=256, description="Permissions it is limited to (default all)."
    )
    expires_days: float | None = Field(
        default=None, gt=0, le=3650, description="Days until it expires (default never)."
    )


def _workspace(request: Request) -> Workspace:
    workspace: Workspace = request.app.state.workspace
    return workspace


def _actor(request: Request) -> str:
    principal: Principal = request.state.principal
    return principal.actor


def _caller(request: Request) -> Caller | None:
    return getattr(request.state, "caller", None)


def _granter(request: Request) -> frozenset[str] | None:
    """What the caller holds in the request's project (None: the local single user)."""
    return getattr(request.state, "permissions", None)


def _accounts(request: Request) -> AccountsAuthorizer:
    authorizer = request.app.state.authorizer
    if not isinstance(authorizer, AccountsAuthorizer):
        raise InvalidRequestError(
            "This server runs without accounts (single user): create one with "
            "`forgeml users create` and restart it."
        )
    return authorizer


def _own_name(request: Request) -> str:
    caller = _caller(request)
    return caller.name if caller is not None else _actor(request)


def _over(request: Request, user: str, permission: str) -> None:
    """Refuse acting on `user`'s account (which spans projects) unless the caller holds
    `permission` in the default project and in every project `user` is a member of, and
    there holds all `user` holds: a project's owner cannot reach an account elsewhere.

    Raises:
        NotFoundError: no such account.
        PermissionDeniedError: the caller holds less.
    """
    caller = _caller(request)
    roles = auth.roles_of(_workspace(request), user)
    if caller is None:
        return
    for project in sorted({auth.DEFAULT_PROJECT, *roles}):
        held = auth.permissions_in(_workspace(request), caller, project)
        if permission not in held:
            raise PermissionDeniedError(
                f"{caller.name} may not {permission} in the project {project!r}, "
                f"where the account {user} is {roles.get(project, 'known')}."
            )
        try:
            auth.check_grant(held, roles.get(project))
        except PermissionDeniedError:
            raise PermissionDeniedError(
                f"{user} holds more than you ({roles[project]} of {project}): you cannot "
                "change their account or tokens."
            ) from None


# sign-in -------------------------------------------------------------------------------


@router.post("/auth/login", dependencies=[public()])
def login(request: Request, response: Response, body: Login) -> dict[str, Any]:
    """Sign in with a password; sets the session cookie (HttpOnly, SameSite=Strict)."""
    accounts = _accounts(request)
    peer = request.client.host if request.client else None
    address = auth.client_address(peer, request.headers, accounts.settings.trusted_proxies)
    caller, token = accounts.login.login(body.name, body.password, address, now=accounts.clock())
    # Secure over https, also when a trusted proxy ends TLS and forwards over http
    accounts.set_session_cookie(response, token, secure=request_scheme(request) == "https")
    return {"user": caller.name, "kind": caller.kind}


@router.post("/auth/logout", dependencies=[public()])
def logout(request: Request, response: Response) -> dict[str, Any]:
    """End the cookie's session (if any) and clear the cookie."""
    authorizer = request.app.state.authorizer
    cookie = request.cookies.get(SESSION_COOKIE)
    if isinstance(authorizer, AccountsAuthorizer) and cookie:
        token = auth.unsign(authorizer.session_key, cookie)
        try:
            caller = authorizer.authenticate(token or "")
        except AuthenticationError:
            caller = None
        if caller is not None and caller.via == "session":
            auth.revoke_token(authorizer.workspace, caller.token_id, actor=caller.name)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return {"status": "signed out"}


# the project whose roles a call of these account routes reads (not a resource filter)
ProjectQuery = Annotated[
    str | None, Query(description="The project to act in (default: `default`).")
]


@router.get("/auth/me", dependencies=[require("account:read")])
def me(request: Request, project: ProjectQuery = None) -> dict[str, Any]:
    """The caller: account, roles by project, and what it may do in the request's project."""
    caller = _caller(request)
    if caller is None:
        principal: Principal = request.state.principal
        return {"name": principal.actor, "kind": principal.kind, "roles": {}, "permissions": "*"}
    workspace = _workspace(request)
    return auth.get_user(workspace, caller.name) | {
        "via": caller.via,
        "scopes": sorted(caller.scopes) if caller.scopes is not None else None,
        "roles": auth.roles_of(workspace, caller.name),
        "project": request_project(request),
        "permissions": sorted(_granter(request) or ()),
    }


@router.patch("/auth/me", dependencies=[require("account:write")])
def update_me(request: Request, body: OwnUpdate) -> dict[str, Any]:
    """Change one's own e-mail or password (the current password is asked for)."""
    accounts = _accounts(request)
    name = _own_name(request)
    workspace = _workspace(request)
    passwords = accounts.login.passwords
    if body.password is not None:
        current = body.current_password
        if current is None or not auth.check_password(workspace, name, current, passwords):
            raise PermissionDeniedError("Give your current password to set a new one.")
        auth.set_password(workspace, name, body.password, passwords, actor=name)
    if body.email is not None:
        auth.set_email(workspace, name, body.email, actor=name)
    return auth.get_user(workspace, name)


# own tokens ----------------------------------------------------------------------------


@router.get("/tokens", dependencies=[require("account:read")])
def own_tokens(request: Request) -> dict[str, Any]:
    """The caller's API tokens (never their secrets)."""
    return {"tokens": auth.list_tokens(_workspace(request), _own_name(request))}


@router.post("/tokens", status_code=201, dependencies=[require("account:write")])
def new_own_token(request: Request, body: NewToken) -> dict[str, Any]:
    """A token for the caller, within the caller's own scope; shown once."""
    caller = _caller(request)
    return _issue(request, _own_name(request), body, caller.scopes if caller else None)


@router.delete("/tokens/{token_id}", dependencies=[require("account:write")])
def revoke_own_token(request: Request, token_id: str) -> dict[str, Any]:
    """Revoke one of the caller's tokens (someone else's: 404)."""
    name = _own_name(request)
    return auth.revoke_token(_workspace(request), token_id, actor=_actor(request), user=name)


def _issue(
    request: Request, user: str, body: NewToken, within: frozenset[str] | None
) -> dict[str, Any]:
    expires = timedelta(days=body.expires_days) if body.expires_days is not None else None
    summary, token = auth.issue_token(
        _workspace(request), user, body.name, actor=_actor(request),
        scopes=body.scopes, expires_in=expires, within=within,
    )  # fmt: skip
    return summary | {"token": token}


# users ---------------------------------------------------------------------------------


@router.get("/users", dependencies=[require("users:read")])
def users(request: Request) -> dict[str, Any]:
    """Every account (never a password hash)."""
    return {"users": auth.list_users(_workspace(request))}


@router.post("/users", status_code=201, dependencies=[require("users:manage")])
def new_user(request: Request, body: NewUser, project: ProjectQuery = None) -> dict[str, Any]:
    """Create an account, optionally with a role in the request's project."""
    workspace, actor = _workspace(request), _actor(request)
    project = decision_project(request, "users:manage")  # where the permission was decided
    if body.role is not None:
        auth.check_grant(_granter(request), check_role(body.role))
    passwords = _accounts(request).login.passwords if body.password is not None else None
    summary = auth.create_user(
        workspace, body.name, actor=actor, kind=body.kind, email=body.email,
        password=body.password, passwords=passwords,
    )  # fmt: skip
    if body.role is not None:
        auth.add_member(
            workspace, project, body.name, body.role, actor=actor, granter=_granter(request)
        )
    return summary


@router.get("/users/{name}", dependencies=[require("users:read")])
def user(request: Request, name: str) -> dict[str, Any]:
    """One account (404 when unknown) and its role in each project (`users show --json`)."""
    workspace = _workspace(request)
    return auth.get_user(workspace, name) | {"roles": auth.roles_of(workspace, name)}


@router.patch("/users/{name}", dependencies=[require("users:manage")])
def update_user(request: Request, name: str, body: UserUpdate) -> dict[str, Any]:
    """Disable or enable an account, set its e-mail or password."""
    workspace, actor = _workspace(request), _actor(request)
    _over(request, name, "users:manage")
    if body.password is not None:
        passwords = _accounts(request).login.passwords
        auth.set_password(workspace, name, body.password, passwords, actor=actor)
    if body.email is not None:
        auth.set_email(workspace, name, body.email, actor=actor)
    if body.disabled is not None:
        auth.set_disabled(workspace, name, body.disabled, actor=actor)
    return auth.get_user(workspace, name)


@router.get("/users/{name}/tokens", dependencies=[require("tokens:manage")])
def user_tokens(request: Request, name: str) -> dict[str, Any]:
    """An account's API tokens (never their secrets)."""
    _over(request, name, "tokens:manage")
    return {"tokens": auth.list_tokens(_workspace(request), name)}


@router.post("/users/{name}/tokens", status_code=201, dependencies=[require("tokens:manage")])
def new_user_token(request: Request, name: str, body: NewToken) -> dict[str, Any]:
    """A token for a service account (a person makes their own); shown once."""
    _over(request, name, "tokens:manage")
    if auth.get_user(_workspace(request), name)["kind"] != "service":
        raise InvalidRequestError(
            f"{name} is a person: people make their own tokens (POST /api/v1/tokens)."
        )
    caller = _caller(request)
    return _issue(request, name, body, caller.scopes if caller else None)


@router.delete("/users/{name}/tokens/{token_id}", dependencies=[require("tokens:manage")])
def revoke_user_token(request: Request, name: str, token_id: str) -> dict[str, Any]:
    """Revoke an account's token."""
    _over(request, name, "tokens:manage")
    return auth.revoke_token(_workspace(request), token_id, actor=_actor(request), user=name)


# projects ------------------------------------------------------------------------------


@router.get("/projects", dependencies=[require("projects:read")])
def projects(request: Request) -> dict[str, Any]:
    """Every project with its member count."""
    return {"projects": auth.list_projects(_workspace(request))}


@router.post("/projects", status_code=201, dependencies=[require("projects:manage")])
def new_project(request: Request, body: NewProject) -> dict[str, Any]:
    """Create a project; the caller becomes its owner."""
    caller = _caller(request)
    owner = caller.name if caller is not None else None
    return auth.create_project(_workspace(request), body.name, actor=_actor(request), owner=owner)


@router.get("/projects/{project}/members", dependencies=[require("projects:read")])
def members(request: Request, project: str) -> dict[str, Any]:
    """A project's members and their roles."""
    return {"members": auth.list_members(_workspace(request), project)}


@router.put("/projects/{project}/members/{name}", dependencies=[require("projects:manage")])
def set_member(request: Request, project: str, name: str, body: Membership) -> dict[str, Any]:
    """Give an account a role in the project (no more than the caller holds there)."""
    return auth.add_member(
        _workspace(request), project, name, body.role,
        actor=_actor(request), granter=_granter(request),
    )  # fmt: skip


@router.delete("/projects/{project}/members/{name}", dependencies=[require("projects:manage")])
def remove_member(request: Request, project: str, name: str) -> dict[str, Any]:
    """Take an account's role in the project away (no more than the caller holds there)."""
    return auth.remove_member(
        _workspace(request), project, name, actor=_actor(request), granter=_granter(request)
    )
