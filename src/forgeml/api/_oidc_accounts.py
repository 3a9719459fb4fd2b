"""The accounts side of an OIDC sign-in: `oidc_router`'s `on_identity`.

A verified `Identity` finds (or, at its first sign-in, creates) its account by issuer and
subject, has its OIDC-granted roles set from the provider's groups (`group_roles`; manual
grants untouched), and is signed in with a session cookie as a password sign-in is. A
disabled account is refused (401) and nothing about it changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi import Response
from fastapi.responses import JSONResponse

from forgeml.api._accounts import AccountsAuthorizer
from forgeml.auth import find_or_create_external_user, set_project_roles
from forgeml.auth.oidc import Identity
from forgeml.core.errors import AuthenticationError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def account_name(identity: Identity) -> str:
    """A plain account name for a new OIDC account: the e-mail's local part, else the
    name, else the subject, with anything but letters, digits, '.', '_', '-' dropped."""
    for candidate in (
        identity.email.partition("@")[0] if identity.email else None,
        identity.name,
        identity.subject,
    ):
        cleaned = _UNSAFE.sub("-", candidate or "").strip(".-_")[:100]
        if cleaned:
            return cleaned
    return "user"


def oidc_sign_in(authorizer: AccountsAuthorizer, *, secure: bool) -> Callable[[Identity], Response]:
    """The `on_identity` of `oidc_router` for a server whose accounts `authorizer` holds.

    `secure`: the server is reached over https (the session cookie is then Secure).
    """

    def on_identity(identity: Identity) -> Response:
        workspace = authorizer.workspace
        user = find_or_create_external_user(
            workspace, identity.issuer, identity.subject,
            name=account_name(identity), email=identity.email,
        )  # fmt: skip
        if user["disabled"]:
            raise AuthenticationError(f"The account {user['name']!r} is disabled.")
        roles = set_project_roles(
            workspace, user["name"], dict(identity.roles_by_project), actor=user["name"]
        )
        response = JSONResponse({"user": user["name"], "kind": "user", "roles": roles})
        authorizer.open_session(response, user["name"], secure=secure)
        return response

    return on_identity
