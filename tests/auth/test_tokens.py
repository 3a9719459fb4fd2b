from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from forgeml.auth import (
    authenticate,
    create_user,
    issue_token,
    list_tokens,
    revoke_token,
    set_disabled,
)
from forgeml.core.errors import (
    AuthenticationError,
    InvalidRequestError,
    KeyStateError,
    NotFoundError,
    PermissionDeniedError,
    UsageError,
)
from forgeml.core.store import AuditEvent, TokenRecord

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_token_authenticates_its_account(any_workspace) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    summary, token = issue_token(any_workspace, "ci", "build", actor="tester", now=T0)

    caller = authenticate(any_workspace, token, now=T0)

    assert token.startswith(f"{summary['prefix']}_")
    assert (caller.name, caller.kind, caller.via, caller.scopes) == ("ci", "service", "token", None)


def test_only_a_hash_of_the_secret_is_stored(any_workspace) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    _, token = issue_token(any_workspace, "ci", "build", actor="tester")
    secret = token.split("_", 2)[2]
    with any_workspace.store.session() as session:
        record = session.scalars(select(TokenRecord)).one()
        stored = [str(value) for value in vars(record).values()]
    assert not any(secret in value for value in stored)
    assert len(record.secret_hash) == 64


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("not-a-token", "malformed"),
        ("fmlt_0123456789abcdef_" + "A" * 43, "unknown"),
        ("fmlt_0123456789abcdef_" + "A" * 42, "malformed"),
    ],
)
def test_a_malformed_or_unknown_token_is_refused(any_workspace, token, message) -> None:
    with pytest.raises(AuthenticationError, match=message):
        authenticate(any_workspace, token)


def test_a_wrong_secret_for_a_real_id_is_refused(any_workspace) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    summary, token = issue_token(any_workspace, "ci", "build", actor="tester")
    forged = f"{summary['prefix']}_" + ("B" * 43 if not token.endswith("B" * 43) else "C" * 43)
    with pytest.raises(AuthenticationError, match="unknown"):
        authenticate(any_workspace, forged)


def test_a_token_expires(any_workspace) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    _, token = issue_token(
        any_workspace, "ci", "b", actor="tester", expires_in=timedelta(hours=1), now=T0
    )
    authenticate(any_workspace, token, now=T0 + timedelta(minutes=59))
    with pytest.raises(AuthenticationError, match="expired at 2026-12-01 13:00 UTC"):
        authenticate(any_workspace, token, now=T0 + timedelta(hours=1))


def test_a_revoked_token_is_refused_and_cannot_be_revoked_twice(any_workspace) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    summary, token = issue_token(any_workspace, "ci", "b", actor="tester")

    revoked = revoke_token(any_workspace, summary["prefix"], actor="alice")

    assert revoked["revoked_at"] is not None
    with pytest.raises(AuthenticationError, match="revoked"):
        authenticate(any_workspace, token)
    with pytest.raises(KeyStateError, match="revoked already"):
        revoke_token(any_workspace, summary["id"], actor="alice")
    with any_workspace.store.session() as session:
        actions = [(e.actor, e.action) for e in session.scalars(select(AuditEvent))]
    assert actions[-1] == ("alice", "token.revoke")


def test_someone_else_s_token_is_not_found(any_workspace) -> None:
    for name in ("ci", "other"):
        create_user(any_workspace, name, actor="tester", kind="service")
    summary, _ = issue_token(any_workspace, "ci", "b", actor="tester")
    with pytest.raises(NotFoundError):
        revoke_token(any_workspace, summary["id"], actor="other", user="other")


def test_a_disabled_account_s_tokens_are_refused_until_enabled(any_workspace) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    _, token = issue_token(any_workspace, "ci", "b", actor="tester")
    set_disabled(any_workspace, "ci", True, actor="tester")
    with pytest.raises(AuthenticationError, match="'ci' is disabled"):
        authenticate(any_workspace, token)
    with pytest.raises(InvalidRequestError, match="disabled"):
        issue_token(any_workspace, "ci", "again", actor="tester")
    set_disabled(any_workspace, "ci", False, actor="tester")
    assert authenticate(any_workspace, token).name == "ci"


def test_last_use_is_recorded_at_most_once_a_minute(any_workspace) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    _, token = issue_token(any_workspace, "ci", "b", actor="tester", now=T0)
    assert list_tokens(any_workspace, "ci")[0]["last_used_at"] is None

    authenticate(any_workspace, token, now=T0 + timedelta(seconds=5))
    authenticate(any_workspace, token, now=T0 + timedelta(seconds=30))
    assert list_tokens(any_workspace)[0]["last_used_at"] == T0 + timedelta(seconds=5)
    authenticate(any_workspace, token, now=T0 + timedelta(seconds=65))
    assert list_tokens(any_workspace)[0]["last_used_at"] == T0 + timedelta(seconds=65)


def test_scopes_are_checked_and_a_scoped_credential_cannot_mint_a_broader_token(
    any_workspace,
) -> None:
    create_user(any_workspace, "ci", actor="tester", kind="service")
    summary, token = issue_token(
        any_workspace, "ci", "b", actor="tester", scopes=["runs:read", "datasets:read"]
    )
    assert summary["scopes"] == ["datasets:read", "runs:read"]
    assert authenticate(any_workspace, token).scopes == {"datasets:read", "runs:read"}
    with pytest.raises(UsageError, match="Unknown permission"):
        issue_token(any_workspace, "ci", "b", actor="tester", scopes=["root:all"])
    within = frozenset({"account:write", "runs:read"})
    with pytest.raises(PermissionDeniedError, match="datasets:read"):
        issue_token(any_workspace, "ci", "c", actor="ci", scopes=["datasets:read"], within=within)
    inherited, _ = issue_token(any_workspace, "ci", "d", actor="ci", within=within)
    assert inherited["scopes"] == ["account:write", "runs:read"]


def test_sessions_are_not_listed_as_tokens(any_workspace) -> None:
    create_user(any_workspace, "alice", actor="tester")
    issue_token(any_workspace, "alice", "session", actor="alice", kind="session")
    issue_token(any_workspace, "alice", "laptop", actor="alice")
    assert [t["name"] for t in list_tokens(any_workspace, "alice")] == ["laptop"]
