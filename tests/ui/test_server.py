"""`forgeml server --api-port` serves the web UI at `/` beside the API."""

from __future__ import annotations

from pathlib import Path

import httpx

from forgeml.cli.server import _api
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.ui._security import CONTENT_SECURITY_POLICY


def test_the_server_s_api_port_serves_the_pages_and_the_api(tmp_path: Path) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        with _api(workspace, "127.0.0.1", 0, "single-user") as url, httpx.Client() as client:
            assert url is not None
            home = client.get(f"{url}/")
            assert home.status_code == 200
            assert home.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert "No runs yet." in home.text and "tester" in home.text
            assert client.get(f"{url}/static/uPlot.iife.min.js").status_code == 200
            assert client.get(f"{url}/api/v1/runs").json() == []
            # the API's own documents keep FastAPI's answers (Swagger UI's scripts run)
            docs = client.get(f"{url}/docs")
            assert docs.status_code == 200 and "content-security-policy" not in docs.headers
            assert client.get(f"{url}/openapi.json").json()["info"]["title"]
    finally:
        workspace.close()
