"""Key and audit routes: a key's secret answered once, revocation, the audit log paged and
filtered, and a tampered chain named by `verify`."""

from __future__ import annotations

from sqlalchemy import delete, select, update

from forgeml.core.store import ApiKeyRecord, AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.gateway import verify_key
from tests.api.conftest import api_client


def test_a_key_is_created_once_listed_without_secret_and_revoked(
    api_workspace: Workspace,
) -> None:
    with api_client(api_workspace) as client:
        made = client.post("/api/v1/keys", json={"name": "ci", "scopes": ["m"], "rate_per_s": 2})
        assert made.status_code == 201, made.text
        key = made.json()
        assert verify_key(api_workspace, key["key"]).prefix == key["prefix"]
        assert (key["created_by"], key["burst"], key["scopes"]) == ("alice", 2, ["m"])
        client.post("/api/v1/keys", json={"name": "batch"})
        listed = client.get("/api/v1/keys", params={"limit": 1})
        assert [k["name"] for k in listed.json()] == ["ci"]
        rest = client.get("/api/v1/keys", params={"after": listed.headers["X-Next-Cursor"]})
        assert [k["name"] for k in rest.json()] == ["batch"]
        assert all("key" not in k and "secret_hash" not in k for k in listed.json() + rest.json())
        revoked = client.post(f"/api/v1/keys/{key['prefix']}/revoke")
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        again = client.post(f"/api/v1/keys/{key['prefix']}/revoke")
        assert again.status_code == 409
        assert again.json() == {
            "error": f"API key {key['prefix']} was revoked already.",
            "code": "key_state",
        }
        assert client.post("/api/v1/keys/nope/revoke").status_code == 404
        for bad in ({"name": "x", "secret": "s"}, {"name": "x", "burst": 0}, {}):
            assert client.post("/api/v1/keys", json=bad).status_code == 422
        assert client.post("/api/v1/keys", json={"name": "no/slash"}).status_code == 400
    with api_workspace.store.session() as session:
        assert len(session.scalars(select(ApiKeyRecord)).all()) == 2


def test_the_audit_log_pages_filters_and_verifies(api_workspace: Workspace) -> None:
    with api_client(api_workspace) as client:
        for name in ("a", "b", "c"):
            client.post("/api/v1/keys", json={"name": name})
        client.post("/api/v1/queues", json={"name": "q"})
        first = client.get("/api/v1/audit", params={"limit": 3})
        after = first.headers["X-Next-Cursor"]
        rest = client.get("/api/v1/audit", params={"limit": 3, "after": after})
        events = first.json() + rest.json()
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert {e["actor"] for e in events} == {"alice"}
        keys = client.get("/api/v1/audit", params={"action": "key.create", "order": "desc"})
        assert [e["object"].startswith("key:") for e in keys.json()] == [True] * 3
        assert [e["seq"] for e in keys.json()] == sorted((e["seq"] for e in keys.json()),
                                                         reverse=True)  # fmt: skip
        queued = client.get("/api/v1/audit", params={"prefix": "queue:"}).json()
        assert [e["action"] for e in queued] == ["queue.create"]
        assert client.get("/api/v1/audit", params={"actor": "bob"}).json() == []
        verified = client.get("/api/v1/audit/verify").json()
        assert verified == {"intact": True, "events": len(events), "head": events[-1]["hash"]}
        with api_workspace.store.session() as session:
            session.execute(update(AuditEvent).where(AuditEvent.seq == 2).values(actor="mallory"))
        broken = client.get("/api/v1/audit/verify")
        assert broken.status_code == 409
        assert broken.json()["error"].startswith("Audit log broken at event 2: its contents")


def test_verify_over_http_finds_a_truncated_tail_by_its_checkpoint(
    api_workspace: Workspace,
) -> None:
    with api_client(api_workspace) as client:
        for name in ("a", "b", "c"):
            assert client.post("/api/v1/keys", json={"name": name}).status_code == 201
        intact = client.get("/api/v1/audit/verify").json()  # checkpoints the head
        assert intact["intact"] is True
        with api_workspace.store.session() as session:
            session.execute(delete(AuditEvent).where(AuditEvent.seq == intact["events"]))
        truncated = client.get("/api/v1/audit/verify")
        assert truncated.status_code == 409
        assert "truncated" in truncated.json()["error"]
