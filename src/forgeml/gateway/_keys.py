"""API keys: create, list, revoke, verify. Only a salted hash of each secret is stored.

A key reads `fml_<prefix>_<secret>`. The prefix is public (it names the row in lists and in
`revoke`); the secret is shown once, at creation, and the store keeps only
`scrypt(secret, salt)` with a per-key random salt (RFC 7914, N=2**14, r=8, p=1: ~16 MiB and
tens of milliseconds per check, so a stolen database does not give up keys cheaply).

A key belongs to the project it was created in (`Workspace.project`). Its scopes name
deployments of that project only (`*`: all of that project's), refused at create when one
names another project's deployment; the gateway refuses it a deployment of another project,
one created or moved there later included (`VerifiedKey.allows` with the route's project). A
list shows the workspace's project's keys; a revoke must act in the key's project.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from forgeml.core.errors import AuthenticationError, KeyStateError, NotFoundError, UsageError
from forgeml.core.ids import new_id, validate_name
from forgeml.core.store import ApiKeyRecord, DeploymentRecord
from forgeml.core.workspace import Workspace

KEY_MARK = "fml"
# scrypt cost (RFC 7914): N=2**14, r=8, p=1 uses 16 MiB and ~20-60 ms on one CPU core
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "maxmem": 64 * 1024 * 1024, "dklen": 32}
ALL_DEPLOYMENTS = "*"


@dataclass(frozen=True)
class VerifiedKey:
    """What a request's key is allowed to do, as read from the store."""

    id: str
    prefix: str
    project: str
    scopes: frozenset[str]
    rate_per_s: float | None
    burst: int | None
    daily_quota: int | None

    def scoped(self, deployment: str) -> bool:
        """Whether this key's scopes name `deployment` (or are all of its project's)."""
        return ALL_DEPLOYMENTS in self.scopes or deployment in self.scopes

    def allows(self, deployment: str, project: str) -> bool:
        """Whether this key may call `deployment`, which belongs to `project`."""
        return project == self.project and self.scoped(deployment)


def hash_secret(secret: str, salt: bytes) -> str:
    """Hex scrypt hash of `secret` under `salt`."""
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT).hex()


def split_key(presented: str) -> tuple[str, str]:
    """`(prefix, secret)` of a presented key.

    Raises:
        AuthenticationError: it is not shaped like a forgeml key.
    """
    parts = presented.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_MARK or not parts[1] or not parts[2]:
        raise AuthenticationError("The API key is not a forgeml key (fml_<prefix>_<secret>).")
    return parts[1], parts[2]


def _check_limits(rate_per_s: float | None, burst: int | None, daily_quota: int | None) -> None:
    if rate_per_s is not None and rate_per_s <= 0:
        raise UsageError(f"--rate must be above 0 requests per second, got {rate_per_s:g}.")
    if burst is not None and rate_per_s is None:
        raise UsageError("--burst needs --rate: a burst is the size of a rate limit's bucket.")
    if burst is not None and burst < 1:
        raise UsageError(f"--burst must be at least 1, got {burst}.")
    if daily_quota is not None and daily_quota < 1:
        raise UsageError(f"--daily-quota must be at least 1, got {daily_quota}.")


def create_key(
    workspace: Workspace,
    name: str,
    scopes: list[str] | None = None,
    rate_per_s: float | None = None,
    burst: int | None = None,
    daily_quota: int | None = None,
) -> tuple[dict[str, Any], str]:
    """Create a key; returns its summary and the full key, which is never shown again.

    Args:
        workspace: the workspace whose store keeps the key.
        name: a label for people.
        scopes: deployment names the key may call, of its project; None or ["*"] for all
            of its project's.
        rate_per_s: token-bucket refill rate; None for no rate limit.
        burst: bucket size (default: the rate rounded up, at least 1).
        daily_quota: most forwarded requests per UTC day; None for no quota.

    Raises:
        UsageError: a limit is out of range.
        InvalidNameError: the name or a scope is not a plain identifier.
        OtherProjectError: a scope names a deployment of another project.
    """
    validate_name(name, "key name")
    chosen = sorted(set(scopes or [ALL_DEPLOYMENTS]))
    for scope in chosen:
        if scope != ALL_DEPLOYMENTS:
            validate_name(scope, "scope")
    _check_limits(rate_per_s, burst, daily_quota)
    if rate_per_s is not None and burst is None:
        burst = max(1, math.ceil(rate_per_s))
    prefix, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), secrets.token_bytes(16)
    record = ApiKeyRecord(
        id=new_id(), prefix=prefix, name=name, project=workspace.project, salt=salt.hex(),
        secret_hash=hash_secret(secret, salt), scopes=chosen, rate_per_s=rate_per_s,
        burst=burst, daily_quota=daily_quota, created_by=workspace.actor,
    )  # fmt: skip
    with workspace.store.session() as session:
        _check_scopes_own(session, workspace, chosen)
        session.add(record)
        session.flush()
        summary = key_summary(record)
        workspace.audit(session, "key.create", f"key:{prefix}", _audit_payload(summary))
    return summary, f"{KEY_MARK}_{prefix}_{secret}"


def _check_scopes_own(session: Session, workspace: Workspace, scopes: list[str]) -> None:
    """Refuse a scope naming a deployment of another project (a name no deployment has yet
    is kept: the gateway refuses it if it is then deployed in another project)."""
    named = [scope for scope in scopes if scope != ALL_DEPLOYMENTS]
    if not named:
        return
    found = session.execute(
        select(DeploymentRecord.name, DeploymentRecord.project).where(
            DeploymentRecord.name.in_(named), DeploymentRecord.status != "deleted"
        )
    ).all()
    for deployment, project in sorted(found):
        workspace.check_own("Deployment", deployment, project)


def _audit_payload(summary: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "prefix", "name", "project", "scopes", "rate_per_s", "burst", "daily_quota")
    return {field: summary[field] for field in keep}


def key_summary(record: ApiKeyRecord) -> dict[str, Any]:
    """A key as shown to people and in JSON: never the secret, salt or hash."""
    return {
        "id": record.id,
        "prefix": record.prefix,
        "name": record.name,
        "project": record.project,
        "scopes": list(record.scopes),
        "rate_per_s": record.rate_per_s,
        "burst": record.burst,
        "daily_quota": record.daily_quota,
        "created_at": record.created_at,
        "created_by": record.created_by,
        "revoked_at": record.revoked_at,
    }


def list_keys(workspace: Workspace) -> list[dict[str, Any]]:
    """Every key of the workspace's project, oldest first, as `key_summary` dicts."""
    with workspace.store.session() as session:
        records = session.scalars(
            select(ApiKeyRecord)
            .where(ApiKeyRecord.project == workspace.project)
            .order_by(ApiKeyRecord.created_at)
        ).all()
        return [key_summary(record) for record in records]


def revoke_key(workspace: Workspace, prefix_or_id: str) -> dict[str, Any]:
    """Revoke a key by its prefix (or `fml_<prefix>`) or id; returns its summary.

    Raises:
        NotFoundError: no key has that prefix or id.
        OtherProjectError: the key belongs to another project.
        KeyStateError: the key is revoked already.
    """
    with workspace.store.session() as session:
        record = find_key(session, prefix_or_id)
        if record is None:
            raise NotFoundError(f"No API key has prefix or id {prefix_or_id!r}.")
        workspace.check_own("API key", record.prefix, record.project)
        if record.revoked_at is not None:
            raise KeyStateError(f"API key {record.prefix} was revoked already.")
        record.revoked_at = datetime.now(UTC)
        session.flush()
        workspace.audit(session, "key.revoke", f"key:{record.prefix}", {"id": record.id})
        return key_summary(record)


def find_key(session: Session, prefix_or_id: str) -> ApiKeyRecord | None:
    """The key a prefix (or `fml_<prefix>`, or the full key) or an id names, in whichever
    project, or None."""
    wanted = prefix_or_id.removeprefix(f"{KEY_MARK}_").split("_", 1)[0]
    return session.scalars(
        select(ApiKeyRecord).where(or_(ApiKeyRecord.prefix == wanted, ApiKeyRecord.id == wanted))
    ).first()


def verify_key(workspace: Workspace, presented: str) -> VerifiedKey:
    """Check a presented key against the store (runs the KDF: call it off the event loop).

    Raises:
        AuthenticationError: malformed, unknown, wrong secret or revoked.
    """
    prefix, secret = split_key(presented)
    with workspace.store.session() as session:
        record = session.scalars(select(ApiKeyRecord).where(ApiKeyRecord.prefix == prefix)).first()
        if record is None:
            raise AuthenticationError("Unknown API key.")
        expected, salt = record.secret_hash, bytes.fromhex(record.salt)
        verified, revoked = _verified(record), record.revoked_at is not None
    if not hmac.compare_digest(hash_secret(secret, salt), expected):
        raise AuthenticationError("Unknown API key.")
    if revoked:
        raise AuthenticationError(f"API key {prefix} has been revoked.")
    return verified


def reread_key(workspace: Workspace, key_id: str) -> VerifiedKey:
    """The current scopes and limits of a key whose secret was verified before (no KDF).

    Raises:
        AuthenticationError: the key has been revoked (or is gone) since.
    """
    with workspace.store.session() as session:
        record = session.get(ApiKeyRecord, key_id)
        if record is None:
            raise AuthenticationError("Unknown API key.")
        if record.revoked_at is not None:
            raise AuthenticationError(f"API key {record.prefix} has been revoked.")
        return _verified(record)


def _verified(record: ApiKeyRecord) -> VerifiedKey:
    return VerifiedKey(
        id=record.id, prefix=record.prefix, project=record.project,
        scopes=frozenset(record.scopes),
        rate_per_s=record.rate_per_s, burst=record.burst, daily_quota=record.daily_quota,
    )  # fmt: skip
