from __future__ import annotations

import hashlib
import sqlite3

import pytest
from sqlalchemy import select

from forgeml.core.errors import (
    AuthenticationError,
    InvalidNameError,
    KeyStateError,
    NotFoundError,
    OtherProjectError,
    UsageError,
)
from forgeml.core.store import ApiKeyRecord, AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.gateway import _keys, create_key, list_keys, revoke_key, verify_key
from forgeml.gateway._auth import KeyCache, presented_key
from tests.gateway.conftest import add_deployment


def test_key_is_stored_only_as_a_salted_hash(workspace: Workspace) -> None:
    summary, key = create_key(workspace, "ci", ["adult"], rate_per_s=5)
    mark, prefix, secret = key.split("_", 2)
    assert (mark, prefix) == ("fml", summary["prefix"])
    assert summary["burst"] == 5
    workspace.store.engine.dispose()  # checkpoint nothing is left only in memory
    with sqlite3.connect(workspace.settings.home / "forgeml.db") as db:
        dump = "\n".join(db.iterdump())
    assert secret not in dump
    assert hashlib.sha256(secret.encode()).hexdigest() not in dump
    with workspace.store.session() as session:
        record = session.scalars(select(ApiKeyRecord)).one()
        assert len(bytes.fromhex(record.salt)) == 16
        assert record.secret_hash not in (secret, hashlib.sha256(secret.encode()).hexdigest())
        events = session.scalars(select(AuditEvent)).all()
    assert [event.action for event in events] == ["key.create"]
    assert secret not in str(events[0].payload)


def test_two_keys_get_different_salts(workspace: Workspace) -> None:
    create_key(workspace, "a")
    create_key(workspace, "b")
    with workspace.store.session() as session:
        salts = session.scalars(select(ApiKeyRecord.salt)).all()
    assert len(set(salts)) == 2


def test_verify_accepts_the_key_and_refuses_a_wrong_secret(workspace: Workspace) -> None:
    summary, key = create_key(workspace, "ci", ["adult", "sst2"], daily_quota=10)
    verified = verify_key(workspace, key)
    assert verified.id == summary["id"]
    assert verified.allows("adult", "default") and not verified.allows("other", "default")
    assert verified.daily_quota == 10
    with pytest.raises(AuthenticationError, match="Unknown API key"):
        verify_key(workspace, key[:-2] + ("xx" if not key.endswith("xx") else "yy"))
    with pytest.raises(AuthenticationError, match="Unknown API key"):
        verify_key(workspace, "fml_000000000000_secret")
    with pytest.raises(AuthenticationError, match="not a forgeml key"):
        verify_key(workspace, "sk-something")


def test_revoke_by_prefix_refuses_the_key_and_is_audited(workspace: Workspace) -> None:
    summary, key = create_key(workspace, "ci")
    revoked = revoke_key(workspace, summary["prefix"])
    assert revoked["revoked_at"] is not None
    with pytest.raises(AuthenticationError, match="revoked"):
        verify_key(workspace, key)
    with pytest.raises(KeyStateError, match="revoked already"):
        revoke_key(workspace, summary["id"])
    with pytest.raises(NotFoundError, match="No API key"):
        revoke_key(workspace, "nosuchkey")
    with workspace.store.session() as session:
        actions = session.scalars(select(AuditEvent.action).order_by(AuditEvent.seq)).all()
    assert actions == ["key.create", "key.revoke"]


def test_list_never_shows_secret_salt_or_hash(workspace: Workspace) -> None:
    _, key = create_key(workspace, "ci")
    (listed,) = list_keys(workspace)
    assert set(listed).isdisjoint({"salt", "secret_hash", "key", "secret"})
    assert key.split("_", 2)[2] not in str(listed)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"rate_per_s": 0}, "--rate must be above 0"),
        ({"burst": 3}, "--burst needs --rate"),
        ({"rate_per_s": 1, "burst": 0}, "--burst must be at least 1"),
        ({"daily_quota": 0}, "--daily-quota must be at least 1"),
    ],
)
def test_bad_limits_are_refused(workspace: Workspace, limits: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        create_key(workspace, "ci", **limits)
    assert list_keys(workspace) == []


def test_bad_scope_is_refused(workspace: Workspace) -> None:
    with pytest.raises(InvalidNameError, match="Invalid scope"):
        create_key(workspace, "ci", ["../etc"])


def test_cache_trusts_a_verdict_for_its_ttl_only(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    cache = KeyCache(workspace, ttl_s=5.0, clock=lambda: now[0])
    summary, key = create_key(workspace, "ci", ["a"])
    kdf_runs = []
    real_hash = _keys.hash_secret
    monkeypatch.setattr(_keys, "hash_secret", lambda *a: kdf_runs.append(1) or real_hash(*a))
    assert cache.cached(key) is None
    assert cache.verify(key).id == summary["id"]
    with workspace.store.session() as session:  # the scopes change in the store
        session.get(ApiKeyRecord, summary["id"]).scopes = ["a", "b"]
    now[0] += 5.1
    assert cache.cached(key) is None
    assert cache.verify(key).scopes == {"a", "b"}  # re-read, not re-hashed
    assert len(kdf_runs) == 1
    revoke_key(workspace, summary["prefix"])
    now[0] += 4.9
    cached = cache.cached(key)
    assert cached is not None and cached.id == summary["id"]
    now[0] += 0.2
    assert cache.cached(key) is None
    with pytest.raises(AuthenticationError, match="revoked"):
        cache.verify(key)
    with pytest.raises(AuthenticationError, match="revoked"):
        cache.cached(key)


@pytest.mark.parametrize(
    ("authorization", "x_api_key", "expected"),
    [("Bearer fml_a_b", None, "fml_a_b"), ("bearer  fml_a_b ", None, "fml_a_b"),
     (None, "fml_c_d", "fml_c_d"), ("Basic xyz", "fml_c_d", "fml_c_d")],
)  # fmt: skip
def test_presented_key_reads_either_header(
    authorization: str | None, x_api_key: str | None, expected: str
) -> None:
    assert presented_key(authorization, x_api_key) == expected


def test_no_key_header_is_refused() -> None:
    with pytest.raises(AuthenticationError, match="No API key"):
        presented_key("Basic xyz", None)


def test_a_key_belongs_to_its_project_and_is_listed_there_only(workspace: Workspace) -> None:
    team_a, team_b = workspace.in_project("team-a"), workspace.in_project("team-b")
    summary, key = create_key(team_a, "ci-a")
    create_key(team_b, "ci-b")
    assert summary["project"] == "team-a"
    assert verify_key(workspace, key).project == "team-a"
    assert [k["name"] for k in list_keys(team_a)] == ["ci-a"]
    assert [k["name"] for k in list_keys(team_b)] == ["ci-b"]
    assert list_keys(workspace) == []


def test_a_scope_naming_another_projects_deployment_is_refused(workspace: Workspace) -> None:
    add_deployment(workspace, "served-a", ["http://127.0.0.1:9"], project="team-a")
    team_a, team_b = workspace.in_project("team-a"), workspace.in_project("team-b")
    with pytest.raises(OtherProjectError, match="'served-a' belongs to the project 'team-a'"):
        create_key(team_b, "ci", ["served-a", "to-come"])
    assert list_keys(team_b) == []
    # its own project's deployment, or a name no deployment has yet
    summary, _ = create_key(team_a, "ci", ["served-a", "to-come"])
    assert summary["scopes"] == ["served-a", "to-come"]


def test_a_key_of_another_project_is_not_revoked(workspace: Workspace) -> None:
    summary, key = create_key(workspace.in_project("team-a"), "ci")
    with pytest.raises(OtherProjectError, match="belongs to the project 'team-a'"):
        revoke_key(workspace.in_project("team-b"), summary["prefix"])
    assert verify_key(workspace, key).id == summary["id"]
    assert revoke_key(workspace.in_project("team-a"), summary["id"])["revoked_at"] is not None
