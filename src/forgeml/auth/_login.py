"""Password sign-in, limited per account and per client address.

An attempt is recorded as failed before the password is checked (in the transaction that
counts the earlier ones, so concurrent guesses cannot slip past the limit) and marked
succeeded afterwards. Failures count over `login_window_s`; an account's count restarts
at its last success, an address's does not. The client address is the connection's peer;
`X-Forwarded-For` is read only when that peer is a proxy the server was told to trust,
and `True-Client-IP` never (Fleet CVE-2026-46356: limits bypassed by spoofed headers).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forgeml.auth._passwords import Passwords
from forgeml.auth._settings import AuthSettings
from forgeml.auth._tokens import Caller, authenticate, issue_token
from forgeml.auth._users import aware
from forgeml.core.errors import AuthenticationError, RateLimitedError
from forgeml.core.store import LoginAttemptRecord, UserRecord
from forgeml.core.workspace import Workspace

_REFUSED = "The account name or password is wrong."


def client_address(peer: str | None, headers: Mapping[str, str], trusted_proxies: list[str]) -> str:
    """The address a request came from: `peer`, or, when `peer` is a trusted proxy, the
    rightmost `X-Forwarded-For` entry that is not one (the one the proxies themselves saw;
    entries left of it are whatever the client wrote)."""
    address = peer or "unknown"
    if address not in trusted_proxies:
        return address
    hops = [hop.strip() for hop in headers.get("x-forwarded-for", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return address  # a garbled header: keep the proxy's own address
        if hop not in trusted_proxies:
            return hop
    return address


def client_scheme(
    peer: str | None, scheme: str, headers: Mapping[str, str], trusted_proxies: list[str]
) -> str:
    """The scheme the client reached the server by: `scheme` (the connection's), or, when
    `peer` is a trusted proxy, the `X-Forwarded-Proto` it set (a TLS-terminating proxy
    speaks http to the server). The last entry counts: the one the nearest proxy wrote."""
    if (peer or "unknown") not in trusted_proxies:
        return scheme
    forwarded = headers.get("x-forwarded-proto", "").split(",")[-1].strip().lower()
    return forwarded if forwarded in ("http", "https") else scheme


class PasswordLogin:
    """Signs accounts in with passwords and hands out session tokens."""

    def __init__(self, workspace: Workspace, settings: AuthSettings) -> None:
        self.workspace = workspace
        self.settings = settings
        self.passwords = Passwords(settings)

    def login(
        self, username: str, password: str, address: str, *, now: datetime | None = None
    ) -> tuple[Caller, str]:
        """Check `password` for `username` coming from `address`; a session token for it.

        Raises:
            RateLimitedError: too many failures for the account or the address lately.
            AuthenticationError: a wrong name or password, a disabled account (one
                sentence for all, so names cannot be probed).
        """
        moment = now or datetime.now(UTC)
        username, address = username[:128], address[:64]
        with self.workspace.store.session() as session:
            self._check_limits(session, username, address, moment)
            attempt = LoginAttemptRecord(
                username=username, address=address, at=moment, succeeded=False
            )
            session.add(attempt)
            user = session.scalar(select(UserRecord).where(UserRecord.name == username))
            stored = user.password_hash if user is not None else None
        if not self.passwords.verify(stored, password) or user is None or user.disabled:
            raise AuthenticationError(_REFUSED)
        with self.workspace.store.session() as session:
            session.get_one(LoginAttemptRecord, attempt.id).succeeded = True
        lifetime = timedelta(hours=self.settings.session_hours)
        _, token = issue_token(
            self.workspace, username, "session", actor=username,
            expires_in=lifetime, kind="session", now=moment,
        )  # fmt: skip
        every = timedelta(seconds=self.settings.token_last_used_every_s)
        return authenticate(self.workspace, token, now=moment, touch_every=every), token

    def _check_limits(self, session: Session, username: str, address: str, now: datetime) -> None:
        window = now - timedelta(seconds=self.settings.login_window_s)
        last_success = session.scalar(
            select(func.max(LoginAttemptRecord.at)).where(
                LoginAttemptRecord.username == username, LoginAttemptRecord.succeeded.is_(True)
            )
        )
        since = max(window, aware(last_success) or window) if last_success is not None else window
        checks = (
            (LoginAttemptRecord.username == username, since,
             self.settings.login_failures_per_user, "this account"),
            (LoginAttemptRecord.address == address, window,
             self.settings.login_failures_per_address, "this address"),
        )  # fmt: skip
        for condition, start, limit, who in checks:
            failures = session.execute(
                select(func.count(), func.min(LoginAttemptRecord.at)).where(
                    condition,
                    LoginAttemptRecord.succeeded.is_(False),
                    LoginAttemptRecord.at > start,
                )
            ).one()
            if failures[0] >= limit:
                oldest = aware(failures[1]) or now
                retry = max(1.0, (oldest - window).total_seconds())
                raise RateLimitedError(
                    f"Too many failed sign-ins from {who}: try again in {retry:.0f} s.", retry
                )
