from __future__ import annotations

from fastapi.testclient import TestClient

from forgeml.api._reading import Cadence
from forgeml.core.workspace import Workspace
from tests.api.conftest import api_client
from tests.core.store.test_read_sessions import _long_write


def test_get_routes_answer_while_a_long_write_holds_the_lock(api_workspace: Workspace) -> None:
    with api_client(api_workspace) as api:
        _reads_beside_a_write(api_workspace, api)


def _reads_beside_a_write(api_workspace: Workspace, api: TestClient) -> None:
    assert api.get("/api/v1/runs").status_code == 200  # the reaper's first turn: a write
    assert api.get("/api/v1/queues").status_code == 200  # creates `default`: a write
    with _long_write(api_workspace.store) as writer:
        for url in ("/api/v1/runs", "/api/v1/queues", "/api/v1/audit", "/api/v1/datasets"):
            assert api.get(url).status_code == 200, url
        assert writer.is_alive()


def test_a_cadence_is_due_once_per_period() -> None:
    now = [100.0]
    cadence = Cadence(15.0, clock=lambda: now[0])

    assert cadence.due()
    assert not cadence.due()
    now[0] = 114.9
    assert not cadence.due()
    now[0] = 115.0
    assert cadence.due()
    assert not cadence.due()
