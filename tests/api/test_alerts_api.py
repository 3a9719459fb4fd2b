"""The control plane's alert routes and Alertmanager receiver, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from forgeml.api import api_in_thread
from forgeml.core.config import Settings
from forgeml.core.store import AlertRecord, AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import fired_since


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()


@pytest.fixture
def api(workspace: Workspace) -> Iterator[httpx.Client]:
    with api_in_thread(workspace) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def _message(status: str = "firing", fingerprint: str = "a1b2c3d4e5f60718") -> dict[str, Any]:
    alert = {
        "status": status,
        "labels": {"alertname": "ForgemlErrorRateHigh", "model": "m", "severity": "critical"},
        "annotations": {"summary": "Model m: 10% of requests fail with a server error."},
        "startsAt": "2026-12-03T10:00:00.000Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-12-03T10:05:00Z",
        "generatorURL": "http://prometheus/graph",
        "fingerprint": fingerprint,
    }
    return {
        "version": "4", "groupKey": '{}:{alertname="ForgemlErrorRateHigh"}',
        "truncatedAlerts": 0, "status": status, "receiver": "forgeml",
        "groupLabels": {"alertname": "ForgemlErrorRateHigh"},
        "commonLabels": alert["labels"], "commonAnnotations": alert["annotations"],
        "externalURL": "http://alertmanager", "alerts": [alert],
    }  # fmt: skip


def _count(workspace: Workspace, model: type[Any]) -> int:
    with workspace.store.session() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_alertmanager_alerts_are_recorded_refreshed_and_resolved(
    api: httpx.Client, workspace: Workspace
) -> None:
    answer = api.post("/api/v1/alertmanager", json=_message())
    assert answer.status_code == 200, answer.text
    assert answer.json()["opened"] == 1
    # Alertmanager repeats a firing group: the same alert, refreshed, not a second one
    assert api.post("/api/v1/alertmanager", json=_message()).json()["refreshed"] == 1
    (alert,) = api.get("/api/v1/alerts", params={"state": "firing"}).json()["alerts"]
    assert alert["source"] == "alertmanager"
    assert alert["rule"] == "ForgemlErrorRateHigh"
    assert alert["severity"] == "critical"
    assert alert["fingerprint"] == "a1b2c3d4e5f60718"
    assert [a.id for a in fired_since(workspace, 0)] == [alert["id"]]
    assert api.post("/api/v1/alertmanager", json=_message("resolved")).json()["resolved"] == 1
    shown = api.get(f"/api/v1/alerts/{alert['id']}").json()
    assert shown["state"] == "resolved"
    assert shown["resolved_at"].startswith("2026-12-03T10:05:00")
    assert api.get("/api/v1/alerts", params={"state": "firing"}).json()["alerts"] == []


def test_an_alert_is_acknowledged_once(api: httpx.Client, workspace: Workspace) -> None:
    api.post("/api/v1/alertmanager", json=_message())
    (alert,) = api.get("/api/v1/alerts").json()["alerts"]
    first = api.post(f"/api/v1/alerts/{alert['id']}/ack").json()
    assert first["acked_by"] == "tester"
    again = api.post(f"/api/v1/alerts/{alert['id']}/ack").json()
    assert again["acked_at"] == first["acked_at"]


def _broken(message: dict[str, Any]) -> list[dict[str, Any]]:
    no_labels = {**message, "alerts": [{**message["alerts"][0], "labels": {}}]}
    bad_status = {**message, "alerts": [{**message["alerts"][0], "status": "burning"}]}
    return [{**message, "version": "3"}, no_labels, bad_status, {"alerts": []}, [1, 2]]


@pytest.mark.parametrize("index", range(5))
def test_a_malformed_webhook_is_refused_and_records_nothing(
    api: httpx.Client, workspace: Workspace, index: int
) -> None:
    audit_before = _count(workspace, AuditEvent)
    answer = api.post("/api/v1/alertmanager", json=_broken(_message())[index])
    assert answer.status_code == 422
    assert answer.json()["error"].startswith("Not an Alertmanager webhook message (version 4)")
    assert _count(workspace, AlertRecord) == 0
    assert _count(workspace, AuditEvent) == audit_before


def test_a_body_that_is_not_json_and_unknown_ids_are_json_errors(api: httpx.Client) -> None:
    answer = api.post("/api/v1/alertmanager", content=b"{not json")
    assert answer.status_code == 422
    assert answer.json() == {"error": "The body is not JSON.", "code": "invalid_data"}
    missing = api.get("/api/v1/alerts/nope")
    assert missing.status_code == 404
    assert missing.json() == {"error": "No alert has the id 'nope'.", "code": "not_found"}
    assert api.post("/api/v1/alerts/nope/ack").status_code == 404
    wrong = api.get("/api/v1/alerts", params={"state": "on-fire"})
    assert wrong.status_code == 422
    assert wrong.json()["error"].startswith("query.state:")


def test_a_resolution_of_an_unknown_alert_records_nothing(
    api: httpx.Client, workspace: Workspace
) -> None:
    answer = api.post("/api/v1/alertmanager", json=_message("resolved"))
    assert answer.status_code == 200
    assert answer.json()["ignored"] == 1
    assert _count(workspace, AlertRecord) == 0


def test_a_taken_api_port_is_one_sentence(workspace: Workspace) -> None:
    import socket

    from forgeml.api import api_in_thread
    from forgeml.core.errors import UsageError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        refused = pytest.raises(UsageError, match=rf"Cannot serve the API: .*127.0.0.1:{port}")
        with refused, api_in_thread(workspace, "127.0.0.1", port):
            pass
