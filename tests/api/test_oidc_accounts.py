"""OIDC sign-in end to end against the real provider: the callback makes the account, sets
its roles from the groups and signs the browser in with a session the API then accepts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from forgeml.api import create_app
from forgeml.api._accounts import AccountsAuthorizer
from forgeml.api._authz import SingleUser
from forgeml.api._oidc import PREFIX
from forgeml.auth import list_users, roles_of, set_disabled
from forgeml.auth.oidc import OidcConfig
from forgeml.core.config import Settings
from forgeml.core.errors import UsageError
from forgeml.core.workspace import Workspace
from tests.api._accounts_app import Clock
from tests.auth._accounts import fast_settings
from tests.auth._oidc_provider import CLIENTS, REDIRECT_URI, Provider, browser_sign_in, run_provider

SECRET_ENV = "FORGEML_TEST_OIDC_ACCOUNTS_SECRET"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    yield from run_provider(tmp_path_factory.mktemp("oidc"))


@pytest.fixture
def app(provider: Provider, tmp_path, monkeypatch) -> Iterator[tuple[FastAPI, Workspace]]:
    monkeypatch.setenv(SECRET_ENV, CLIENTS["forgeml"])
    config = OidcConfig(
        issuer=provider.issuer,
        client_id="forgeml",
        client_secret_env=SECRET_ENV,
        redirect_uri=REDIRECT_URI,
        group_roles={"vision": {"vision-leads": "maintainer"}},
        allow_private_network=True,
    )
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        authorizer = AccountsAuthorizer(workspace, fast_settings(tmp_path), clock=Clock())
        yield create_app(workspace, authorizer, oidc=config), workspace
    finally:
        workspace.close()


def _sign_in(browser: TestClient) -> dict:
    start = browser.get(f"{PREFIX}/login", follow_redirects=False).headers["location"]
    query = browser_sign_in(start, "alice", "correct horse battery staple")
    response = browser.get(f"{PREFIX}/callback", params=query)
    return {"status": response.status_code, **response.json()}


def test_an_oidc_sign_in_makes_the_account_and_a_session_the_api_accepts(app) -> None:
    app, workspace = app
    with TestClient(app, base_url="http://localhost") as browser:
        signed_in = _sign_in(browser)
        assert signed_in == {
            "status": 200,
            "user": "alice",
            "kind": "user",
            "roles": {"vision": "maintainer"},
        }
        me = browser.get("/api/v1/auth/me?project=vision").json()
        assert (me["name"], me["via"], me["external"]) == ("alice", "session", True)
        assert "projects:read" in me["permissions"]
        assert browser.get("/api/v1/projects/vision/members").status_code == 200
        assert browser.get("/api/v1/alerts").status_code == 403

    with TestClient(app, base_url="http://localhost") as again:
        assert _sign_in(again)["user"] == "alice"
    assert [u["name"] for u in list_users(workspace)] == ["alice"]
    assert roles_of(workspace, "alice") == {"vision": "maintainer"}

    set_disabled(workspace, "alice", True, actor="tester")
    with TestClient(app, base_url="http://localhost") as refused:
        answer = _sign_in(refused)
        assert answer["status"] == 401 and "disabled" in answer["error"]
        assert refused.get("/api/v1/auth/me").status_code == 401


def test_oidc_sign_in_needs_accounts(workspace) -> None:
    config = OidcConfig(
        issuer="https://idp.example", client_id="forgeml",
        redirect_uri="https://forgeml.example/api/v1/auth/oidc/callback",
    )  # fmt: skip
    with pytest.raises(UsageError, match="OIDC sign-in needs accounts"):
        create_app(workspace, SingleUser("tester"), oidc=config)
