"""Token routes over every account, as `forgeml tokens list|revoke` act locally: all tokens
the caller may manage, and a revocation by prefix or id alone (the owner is looked up).

The caller needs `tokens:manage` and, for each owner, at least all that owner holds (the
same rule as `/users/{name}/tokens`); another's tokens are left out of the list, and a
revocation of one is refused.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from forgeml import auth
from forgeml.api._account_routes import _over, _workspace
from forgeml.api._authz import Principal, require
from forgeml.api._json import CliRouter
from forgeml.core.errors import NotFoundError, PermissionDeniedError

# answers in the CLI's JSON, so `forgeml users|projects|tokens` print them unchanged
router = CliRouter(prefix="/api/v1/tokens")


@router.get("/all", dependencies=[require("tokens:manage")])
def every_token(request: Request) -> dict[str, Any]:
    """The tokens of every account the caller may manage, newest first (never a secret)."""
    managed: dict[str, bool] = {}
    kept = []
    for token in auth.list_tokens(_workspace(request)):
        owner = token["user"]
        if owner not in managed:
            managed[owner] = _may_manage(request, owner)
        if managed[owner]:
            kept.append(token)
    return {"tokens": kept}


@router.post("/{token}/revoke", dependencies=[require("tokens:manage")])
def revoke_any(request: Request, token: str) -> dict[str, Any]:
    """Revoke a token by its prefix (`fmlt_<id>`) or id, whoever's it is (404 if unknown,
    409 if revoked already)."""
    workspace = _workspace(request)
    token_id = token.removeprefix(auth.PREFIX).split("_")[0]
    owner = next((t["user"] for t in auth.list_tokens(workspace) if t["id"] == token_id), None)
    if owner is None:
        raise NotFoundError(f"No token has the id {token!r}.")
    _over(request, owner, "tokens:manage")
    principal: Principal = request.state.principal
    return auth.revoke_token(workspace, token, actor=principal.actor)


def _may_manage(request: Request, owner: str) -> bool:
    try:
        _over(request, owner, "tokens:manage")
    except PermissionDeniedError:
        return False
    return True
