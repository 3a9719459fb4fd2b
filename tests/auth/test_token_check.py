"""Issue 15: a token check is a read; the last-used time is written at most once an interval."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event

from forgeml.api._accounts import AccountsAuthorizer
from forgeml.auth import authenticate, create_user, get_auth_settings, issue_token, list_tokens
from forgeml.auth import revoke_token as revoke
from forgeml.auth._tokens import _touch
from forgeml.core.config import Settings
from forgeml.core.errors import AuthenticationError, ConfigError
from forgeml.core.workspace import Workspace
from tests.auth._accounts import fast_settings
from tests.core.store.test_read_sessions import _long_write

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(seconds=60)


@contextmanager
def _statements(workspace: Workspace) -> Iterator[list[str]]:
    """Every SQL statement the workspace's engine sends while the block runs."""
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        sent.append(" ".join(statement.split()))

    engine = workspace.store.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _writes(sent: list[str]) -> list[str]:
    """The statements that write or take the writers' lock."""
    starts = ("BEGIN IMMEDIATE", "UPDATE ", "INSERT ", "DELETE ")
    return [s for s in sent if s.upper().startswith(starts) or "PG_ADVISORY" in s.upper()]


def _token(workspace: Workspace, **options: Any) -> tuple[str, str]:
    create_user(workspace, "ci", actor="tester", kind="service")
    summary, token = issue_token(workspace, "ci", "build", actor="tester", now=T0, **options)
    return summary["prefix"], token


def _last_used(workspace: Workspace) -> datetime | None:
    found: datetime | None = list_tokens(workspace, "ci")[0]["last_used_at"]
    return found


def test_checks_within_the_interval_write_nothing_and_the_next_one_writes_once(
    any_workspace: Workspace,
) -> None:
    _, token = _token(any_workspace)
    authenticate(any_workspace, token, now=T0, touch_every=MINUTE)  # first use: written

    with _statements(any_workspace) as sent:
        for second in (1, 30, 59):
            authenticate(
                any_workspace, token, now=T0 + timedelta(seconds=second), touch_every=MINUTE
            )
    assert sent and _writes(sent) == []
    assert _last_used(any_workspace) == T0

    with _statements(any_workspace) as sent:
        authenticate(any_workspace, token, now=T0 + MINUTE, touch_every=MINUTE)
    writes = [s for s in _writes(sent) if s != "BEGIN IMMEDIATE"]  # SQLite's write: one
    assert len(writes) == 1 and writes[0].startswith("UPDATE tokens SET last_used_at")
    assert _last_used(any_workspace) == T0 + MINUTE


def test_last_use_advances_with_the_clock_and_never_moves_back(any_workspace: Workspace) -> None:
    _, token = _token(any_workspace)
    every = timedelta(seconds=10)
    assert _last_used(any_workspace) is None
    for second, expected in [(5, 5), (14, 5), (15, 15), (40, 40), (41, 40)]:
        authenticate(any_workspace, token, now=T0 + timedelta(seconds=second), touch_every=every)
        assert _last_used(any_workspace) == T0 + timedelta(seconds=expected), second
    # another server whose clock lags: its check passes and leaves the later time alone
    authenticate(any_workspace, token, now=T0 + timedelta(seconds=20), touch_every=every)
    # and of two checks that both found the time stale, the later write moves it no further
    _touch(
        any_workspace, token.split("_")[1], T0 + timedelta(seconds=45), T0 + timedelta(seconds=35)
    )
    assert _last_used(any_workspace) == T0 + timedelta(seconds=40)


def test_a_check_within_the_interval_answers_while_a_writer_holds_the_lock(
    any_workspace: Workspace,
) -> None:
    _, token = _token(any_workspace)
    authenticate(any_workspace, token, now=T0, touch_every=MINUTE)
    # the pool outlives the writer: a check that waited for the lock is released first
    with ThreadPoolExecutor(1) as pool, _long_write(any_workspace.store) as writer:
        check = pool.submit(
            authenticate,
            any_workspace,
            token,
            now=T0 + timedelta(seconds=30),
            touch_every=MINUTE,
        )
        assert check.result(timeout=10).name == "ci"
        assert writer.is_alive()


def test_revoked_and_expired_tokens_are_refused_at_once_within_the_interval(
    any_workspace: Workspace, backend_url: str, tmp_path: Any
) -> None:
    prefix, token = _token(any_workspace, expires_in=timedelta(minutes=5))
    authenticate(any_workspace, token, now=T0, touch_every=timedelta(hours=1))
    # revoked through another process's store (its own engine and pool): no cache hides it
    other = Workspace(Settings(home=tmp_path / "home", db_url=backend_url, user="alice"))
    try:
        with pytest.raises(AuthenticationError, match="expired at 2026-12-01 12:05 UTC"):
            authenticate(
                other, token, now=T0 + timedelta(minutes=5), touch_every=timedelta(hours=1)
            )
        revoke(other, prefix, actor="alice")
    finally:
        other.close()
    with pytest.raises(AuthenticationError, match="was revoked"):
        authenticate(
            any_workspace, token, now=T0 + timedelta(seconds=1), touch_every=timedelta(hours=1)
        )
    assert _last_used(any_workspace) == T0


def test_the_server_takes_the_interval_from_its_settings(
    workspace: Workspace, tmp_path: Any
) -> None:
    _, token = _token(workspace)
    now = [T0]
    settings = fast_settings(tmp_path, token_last_used_every_s=3600)
    authorizer = AccountsAuthorizer(workspace, settings, clock=lambda: now[0])
    authorizer.authenticate(token)
    now[0] = T0 + timedelta(minutes=59)
    authorizer.authenticate(token)
    assert _last_used(workspace) == T0
    now[0] = T0 + timedelta(hours=1)
    authorizer.authenticate(token)
    assert _last_used(workspace) == T0 + timedelta(hours=1)


def test_a_negative_interval_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGEML_AUTH_TOKEN_LAST_USED_EVERY_S", "-1")
    get_auth_settings.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"FORGEML_AUTH_TOKEN_LAST_USED_EVERY_S: .*0"):
            get_auth_settings()
    finally:
        get_auth_settings.cache_clear()
