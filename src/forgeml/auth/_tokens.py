"""Tokens: `fmlt_<id>_<secret>`, for API clients (scoped, expiring) and for sign-in sessions.

(`fmlt_`, not the gateway keys' `fml_`: a leaked secret's kind can be told at sight.)

The id (16 hex digits) finds the row; the secret (256 random bits) is checked against its
SHA-256 in constant time. Only the hash is stored: the token is shown once, when issued.
`authenticate` turns a token into a `Caller`, or refuses it with one sentence (401).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from forgeml.auth._settings import get_auth_settings
from forgeml.auth._users import aware, find_user
from forgeml.auth.roles import check_scopes
from forgeml.core import audit
from forgeml.core.errors import (
    AuthenticationError,
    InvalidRequestError,
    KeyStateError,
    NotFoundError,
    PermissionDeniedError,
)
from forgeml.core.ids import validate_name
from forgeml.core.store import TokenRecord, UserRecord
from forgeml.core.workspace import Workspace

PREFIX = "fmlt_"
_TOKEN = re.compile(r"^fmlt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class Caller:
    """Who a token or session belongs to, and what it is limited to."""

    user_id: str
    name: str
    kind: str
    token_id: str
    via: str
    # None: every permission of the account's roles
    scopes: frozenset[str] | None


def _hash(token_id: str, secret: str) -> str:
    return hashlib.sha256(f"{token_id}:{secret}".encode()).hexdigest()


def token_summary(record: TokenRecord, user: str) -> dict[str, Any]:
    """What may be shown of a token (never its secret or hash)."""
    return {
        "id": record.id,
        "prefix": f"{PREFIX}{record.id}",
        "user": user,
        "name": record.name,
        "kind": record.kind,
        "scopes": record.scopes,
        "created_at": aware(record.created_at),
        "created_by": record.created_by,
        "expires_at": aware(record.expires_at),
        "revoked_at": aware(record.revoked_at),
        "last_used_at": aware(record.last_used_at),
    }


def issue_token(
    workspace: Workspace,
    user: str,
    name: str,
    *,
    actor: str,
    scopes: Iterable[str] | None = None,
    expires_in: timedelta | None = None,
    within: frozenset[str] | None = None,
    kind: str = "token",
    now: datetime | None = None,
) -> tuple[dict[str, Any], str]:
    """Issue a token for account `user`; returns its summary and the token itself (show it
    once: it cannot be read back).

    `within`: the scope of the credential asking (None: unlimited), which the new token's
    scope must stay inside, so a scoped token cannot mint a broader one.

    Raises:
        NotFoundError: no such account.
        UsageError: an unknown permission in `scopes`.
        InvalidRequestError: a disabled account, or a non-positive lifetime.
        PermissionDeniedError: `scopes` reach beyond `within`.
    """
    validate_name(name, "token name")
    chosen = check_scopes(scopes) if scopes is not None else None
    if within is not None:
        if chosen is None:
            chosen = sorted(within)
        if not set(chosen) <= within:
            raise PermissionDeniedError(
                "A token cannot be given permissions the credential asking for it lacks "
                f"({sorted(set(chosen) - within)[0]})."
            )
    if expires_in is not None and expires_in <= timedelta(0):
        raise InvalidRequestError("A token's lifetime must be positive.")
    moment = now or datetime.now(UTC)
    token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    with workspace.store.session() as session:
        account = find_user(session, user)
        if account.disabled:
            raise InvalidRequestError(f"The account {user!r} is disabled: enable it first.")
        record = TokenRecord(
            id=token_id,
            user_id=account.id,
            kind=kind,
            name=name,
            secret_hash=_hash(token_id, secret),
            scopes=chosen,
            created_at=moment,
            created_by=actor,
            expires_at=moment + expires_in if expires_in is not None else None,
        )
        session.add(record)
        if kind == "token":
            payload = {"user": user, "scopes": chosen, "expires_at": str(record.expires_at)}
            audit.append(session, actor, "token.create", f"token:{PREFIX}{token_id}", payload)
        else:
            audit.append(session, actor, "auth.login", f"user:{user}", {"via": kind})
    return token_summary(record, user), f"{PREFIX}{token_id}_{secret}"


def authenticate(
    workspace: Workspace,
    token: str,
    *,
    now: datetime | None = None,
    touch_every: timedelta | None = None,
) -> Caller:
    """The caller `token` stands for.

    The check is a read (no writers' lock); the token's last-used time is written in a
    short write of its own only when it is `touch_every` old or older (default: the
    `token_last_used_every_s` setting), so the requests in between write nothing.

    Raises:
        AuthenticationError: a malformed, unknown, revoked or expired token, or a disabled
            account (each one sentence).
    """
    moment = now or datetime.now(UTC)
    with workspace.store.read_session() as session:
        caller, last_used = read_caller(session, token, moment)
    touch_when_due(workspace, caller, last_used, moment, touch_every)
    return caller


def read_caller(session: Session, token: str, moment: datetime) -> tuple[Caller, datetime | None]:
    """The caller `token` stands for at `moment`, read in `session` (a read session: the
    control plane reads the token, the membership and the resource in one), and the time
    the token was last used (for `touch_when_due`).

    Raises:
        AuthenticationError: as `authenticate`.
    """
    match = _TOKEN.match(token)
    if match is None:
        raise AuthenticationError(
            "The token is malformed: forgeml tokens look like fmlt_<id>_<secret>."
        )
    token_id, secret = match.groups()
    found = session.execute(
        select(TokenRecord, UserRecord)
        .join(UserRecord, UserRecord.id == TokenRecord.user_id)
        .where(TokenRecord.id == token_id)
    ).first()
    if found is None or not hmac.compare_digest(found[0].secret_hash, _hash(token_id, secret)):
        raise AuthenticationError("The token is unknown.")
    record, user = found
    _check_usable(record, user, moment)
    scopes = frozenset(record.scopes) if record.scopes is not None else None
    caller = Caller(user.id, user.name, user.kind, token_id, record.kind, scopes)
    return caller, aware(record.last_used_at)


def touch_when_due(
    workspace: Workspace,
    caller: Caller,
    last_used: datetime | None,
    moment: datetime,
    touch_every: timedelta | None = None,
) -> None:
    """Write the token's last-used time when the stored one is `touch_every` old or older
    (default: the `token_last_used_every_s` setting); after the read session has closed."""
    every = touch_every if touch_every is not None else _touch_every_setting()
    if last_used is None or moment - last_used >= every:
        _touch(workspace, caller.token_id, moment, moment - every)


def _check_usable(record: TokenRecord, user: UserRecord, moment: datetime) -> None:
    if record.revoked_at is not None:
        raise AuthenticationError(f"The token {PREFIX}{record.id} was revoked.")
    expires = aware(record.expires_at)
    if expires is not None and expires <= moment:
        raise AuthenticationError(
            f"The token {PREFIX}{record.id} expired at {expires:%Y-%m-%d %H:%M} UTC."
        )
    if user.disabled:
        raise AuthenticationError(f"The account {user.name!r} is disabled.")


def _touch_every_setting() -> timedelta:
    return timedelta(seconds=get_auth_settings().token_last_used_every_s)


def _touch(workspace: Workspace, token_id: str, moment: datetime, stale: datetime) -> None:
    """Write the token's last use: one UPDATE in a short transaction of its own (SQLite's
    write lock for that statement only; not PostgreSQL's writers' lock: it reads nothing
    first, so no other write can slip in between). Its condition keeps the time from
    moving back: of the requests that all found it stale, the first one's write stands."""
    with workspace.store.sessions.begin() as session:
        session.execute(
            update(TokenRecord)
            .where(
                TokenRecord.id == token_id,
                or_(TokenRecord.last_used_at.is_(None), TokenRecord.last_used_at <= stale),
            )
            .values(last_used_at=moment)
            .execution_options(synchronize_session=False)
        )


def list_tokens(workspace: Workspace, user: str | None = None) -> list[dict[str, Any]]:
    """API tokens (not sessions), of `user` or of everyone, newest first."""
    with workspace.store.session() as session:
        query = (
            select(TokenRecord, UserRecord.name)
            .join(UserRecord, UserRecord.id == TokenRecord.user_id)
            .where(TokenRecord.kind == "token")
            .order_by(TokenRecord.created_at.desc(), TokenRecord.id)
        )
        if user is not None:
            query = query.where(UserRecord.id == find_user(session, user).id)
        return [token_summary(record, name) for record, name in session.execute(query).all()]


def _find_token(session: Session, token: str, user: str | None) -> tuple[TokenRecord, str]:
    token_id = token.removeprefix(PREFIX).split("_")[0]
    found = session.execute(
        select(TokenRecord, UserRecord.name)
        .join(UserRecord, UserRecord.id == TokenRecord.user_id)
        .where(TokenRecord.id == token_id)
    ).first()
    # someone else's token is reported as missing: its existence is not theirs to learn
    if found is None or (user is not None and found[1] != user):
        raise NotFoundError(f"No token has the id {token!r}.")
    return found[0], found[1]


def revoke_token(
    workspace: Workspace,
    token: str,
    *,
    actor: str,
    user: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Revoke a token (by id or prefix) or a session; `user`: it must be theirs.

    Raises:
        NotFoundError: no such token (or not `user`'s).
        KeyStateError: it was revoked already.
    """
    with workspace.store.session() as session:
        record, owner = _find_token(session, token, user)
        if record.revoked_at is not None:
            raise KeyStateError(f"The token {PREFIX}{record.id} is revoked already.")
        record.revoked_at = now or datetime.now(UTC)
        action = "token.revoke" if record.kind == "token" else "auth.logout"
        audit.append(session, actor, action, f"token:{PREFIX}{record.id}", {"user": owner})
        return token_summary(record, owner)
