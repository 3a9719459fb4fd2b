"""A real `forgeml server --api-port` with accounts: a token is needed, and is enough."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from forgeml.auth import add_member, create_user, issue_token
from forgeml.core.config import Settings
from forgeml.core.install_keys import SESSION_KEY, install_key
from forgeml.core.workspace import Workspace
from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.train.conftest import forgeml_command, subprocess_env

pytestmark = pytest.mark.slow


def _status(url: str, headers: dict[str, str]) -> int | None:
    try:
        return httpx.get(f"{url}/api/v1/alerts", headers=headers, timeout=5).status_code
    except httpx.HTTPError:
        return None


def test_forgeml_server_with_accounts_asks_every_caller_for_a_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        create_user(workspace, "ci", actor="tester", kind="service")
        add_member(workspace, "default", "ci", "viewer", actor="tester")
        _, token = issue_token(workspace, "ci", "probe", actor="tester")
    finally:
        workspace.close()
    port = free_port()
    command = forgeml_command("server", "--api-port", str(port), "--auth", "accounts")
    log = tmp_path / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, env=subprocess_env(home), stdout=output, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _status(url, {}) == 401, 60, "the API refusing an anonymous call")
        assert _status(url, {"Authorization": f"Bearer {token}"}) == 200
        ack = httpx.post(f"{url}/api/v1/alerts/x/ack", headers={"Authorization": f"Bearer {token}"})
        assert ack.status_code == 403
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0, log.read_text()
    assert "API with accounts" in log.read_text()
    assert token not in log.read_text()
    # the session key was made in the store (shared by every server of it), not the home
    assert not (home / "auth" / "session.key").exists()
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        assert install_key(workspace.store, SESSION_KEY, create=False) is not None
    finally:
        workspace.close()
