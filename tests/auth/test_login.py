from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from forgeml.auth import PasswordLogin, client_address, set_disabled
from forgeml.core.errors import AuthenticationError, RateLimitedError
from tests.auth._accounts import PASSWORD, fast_settings, person

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def login(any_workspace, tmp_path) -> PasswordLogin:
    settings = fast_settings(
        tmp_path, login_failures_per_user=3, login_failures_per_address=5, login_window_s=600
    )
    person(any_workspace, settings, "alice", "viewer")
    return PasswordLogin(any_workspace, settings)


def _fail(login: PasswordLogin, name: str, address: str, now: datetime) -> None:
    with pytest.raises(AuthenticationError, match="name or password is wrong"):
        login.login(name, "wrong password!", address, now=now)


def test_a_password_opens_a_session(login) -> None:
    caller, token = login.login("alice", PASSWORD, "10.0.0.1", now=T0)
    assert (caller.name, caller.via) == ("alice", "session")
    assert token.startswith("fmlt_")


def test_unknown_account_wrong_password_and_disabled_account_read_the_same(login) -> None:
    _fail(login, "nobody", "10.0.0.1", T0)
    _fail(login, "alice", "10.0.0.1", T0)
    set_disabled(login.workspace, "alice", True, actor="tester")
    with pytest.raises(AuthenticationError, match="name or password is wrong"):
        login.login("alice", PASSWORD, "10.0.0.1", now=T0)


def test_an_account_is_limited_from_any_address_until_the_window_passes(login) -> None:
    for i in range(3):
        _fail(login, "alice", f"10.0.0.{i}", T0 + timedelta(seconds=i))
    with pytest.raises(RateLimitedError, match="this account: try again in 598 s") as error:
        login.login("alice", PASSWORD, "10.9.9.9", now=T0 + timedelta(seconds=2))
    assert error.value.retry_after == 598
    assert login.login("alice", PASSWORD, "10.9.9.9", now=T0 + timedelta(seconds=601))


def test_a_success_restarts_the_account_s_count(login) -> None:
    _fail(login, "alice", "10.0.0.1", T0)
    _fail(login, "alice", "10.0.0.1", T0)
    login.login("alice", PASSWORD, "10.0.0.1", now=T0 + timedelta(seconds=1))
    _fail(login, "alice", "10.0.0.1", T0 + timedelta(seconds=2))
    _fail(login, "alice", "10.0.0.1", T0 + timedelta(seconds=3))
    assert login.login("alice", PASSWORD, "10.0.0.1", now=T0 + timedelta(seconds=4))


def test_an_address_is_limited_across_accounts(login) -> None:
    for i in range(5):
        _fail(login, f"user{i}", "10.0.0.7", T0)
    with pytest.raises(RateLimitedError, match="this address"):
        login.login("alice", PASSWORD, "10.0.0.7", now=T0)
    assert login.login("alice", PASSWORD, "10.0.0.8", now=T0)


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "expected"),
    [
        ("203.0.113.9", "1.2.3.4", [], "203.0.113.9"),
        ("10.0.0.2", "1.2.3.4", ["10.0.0.2"], "1.2.3.4"),
        # the client wrote 6.6.6.6 itself; the proxy appended the address it saw
        ("10.0.0.2", "6.6.6.6, 198.51.100.4", ["10.0.0.2"], "198.51.100.4"),
        ("10.0.0.2", "198.51.100.4, 10.0.0.3", ["10.0.0.2", "10.0.0.3"], "198.51.100.4"),
        ("10.0.0.2", "not an address", ["10.0.0.2"], "10.0.0.2"),
        ("10.0.0.2", "", ["10.0.0.2"], "10.0.0.2"),
        (None, "1.2.3.4", [], "unknown"),
    ],
)
def test_the_client_address_trusts_forwarding_only_from_a_known_proxy(
    peer, forwarded, trusted, expected
) -> None:
    headers = {"x-forwarded-for": forwarded, "true-client-ip": "7.7.7.7"}
    assert client_address(peer, headers, trusted) == expected
