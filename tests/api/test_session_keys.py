"""The session-signing key is the store's (issue 15): behind a load balancer, a cookie one
server issued is accepted by another server of the same database, with a home of its own;
an older install's key file keeps its sessions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from forgeml.api import create_app
from forgeml.api._accounts import SESSION_COOKIE, AccountsAuthorizer
from forgeml.auth import load_session_key, session_key
from forgeml.auth._session_key import LEGACY_FILE
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.auth._accounts import PASSWORD, fast_settings, person


def _server(stack: ExitStack, home: Path, db_url: str, tmp_path: Path) -> TestClient:
    workspace = Workspace(Settings(home=home, db_url=db_url, user="tester"))
    stack.callback(workspace.close)
    # no key file named: the store's key, as `forgeml server` runs by default
    settings = fast_settings(tmp_path, session_key_file=None)
    client = TestClient(
        create_app(workspace, AccountsAuthorizer(workspace, settings)), base_url="http://localhost"
    )
    return stack.enter_context(client)


@pytest.fixture
def two_servers(tmp_path: Path, backend_url: str) -> Iterator[tuple[TestClient, TestClient]]:
    with ExitStack() as stack:
        first = _server(stack, tmp_path / "home-0", backend_url, tmp_path)
        workspace = first.app.state.authorizer.workspace
        person(workspace, fast_settings(tmp_path), "dana", "developer")
        yield first, _server(stack, tmp_path / "home-1", backend_url, tmp_path)


def test_a_cookie_issued_by_one_server_is_accepted_by_the_other(
    two_servers: tuple[TestClient, TestClient],
) -> None:
    first, second = two_servers
    signed_in = first.post("/api/v1/auth/login", json={"name": "dana", "password": PASSWORD})
    assert signed_in.status_code == 200, signed_in.text
    cookie = first.cookies[SESSION_COOKIE]

    second.cookies.set(SESSION_COOKIE, cookie)
    me = second.get("/api/v1/auth/me")

    assert me.status_code == 200, me.text
    assert me.json()["roles"] == {"default": "developer"}
    second.cookies.set(SESSION_COOKIE, cookie[:-1] + ("0" if cookie[-1] != "0" else "1"))
    assert second.get("/api/v1/auth/me").status_code == 401


def test_an_older_installs_session_key_file_is_moved_into_the_store(
    tmp_path: Path, backend_url: str
) -> None:
    older = tmp_path / "home-0" / LEGACY_FILE
    key = load_session_key(older)  # what an install before the store's key made
    settings = fast_settings(tmp_path, session_key_file=None)
    workspaces = [
        Workspace(Settings(home=tmp_path / f"home-{n}", db_url=backend_url)) for n in range(2)
    ]
    try:
        assert session_key(workspaces[0], settings) == key
        assert session_key(workspaces[1], settings) == key
    finally:
        for workspace in workspaces:
            workspace.close()


def test_a_key_file_named_in_the_settings_wins_over_the_store(
    tmp_path: Path, workspace: Workspace
) -> None:
    settings = fast_settings(tmp_path)  # names tmp_path/keys/session.key

    named = session_key(workspace, settings)

    assert named == load_session_key(tmp_path / "keys" / "session.key")
    assert named != session_key(workspace, fast_settings(tmp_path, session_key_file=None))
