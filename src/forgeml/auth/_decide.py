"""The permission decision: the caller's role in the project, within the token's scope."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from forgeml.auth._projects import role_in
from forgeml.auth._tokens import Caller
from forgeml.auth.roles import ACCOUNT_PERMISSIONS, role_permissions
from forgeml.core.store import UserRecord
from forgeml.core.workspace import Workspace


def permissions_in(workspace: Workspace, caller: Caller, project: str) -> frozenset[str]:
    """What `caller` may do in `project`: its role's permissions and its own account's,
    cut to its token's scope."""
    # read on every request: a read session, no writers' lock
    with workspace.store.read_session() as session:
        return held_in(session, caller, project)


def held_in(session: Session, caller: Caller, project: str) -> frozenset[str]:
    """`permissions_in`, read in `session` (the request's one read session)."""
    role = role_in(session, caller.user_id, project)
    held = role_permissions(role) | ACCOUNT_PERMISSIONS
    return held if caller.scopes is None else held & caller.scopes


def has_accounts(workspace: Workspace) -> bool:
    """Whether any account exists (then the control plane asks every caller to sign in)."""
    with workspace.store.read_session() as session:
        return session.scalar(select(UserRecord.id).limit(1)) is not None
