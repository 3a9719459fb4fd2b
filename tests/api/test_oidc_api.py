from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from forgeml.api import create_app
from forgeml.api._authz import PUBLIC, api_routes, route_permission
from forgeml.api._oidc import COOKIE, PREFIX, PendingLogins, oidc_router
from forgeml.auth.oidc import Identity, LoginState, OidcConfig
from forgeml.core.config import Settings
from forgeml.core.errors import ServiceUnavailableError
from forgeml.core.workspace import Workspace
from tests.auth._oidc_provider import CLIENTS, REDIRECT_URI, Provider, browser_sign_in, run_provider

SECRET_ENV = "FORGEML_TEST_OIDC_API_SECRET"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    yield from run_provider(tmp_path_factory.mktemp("oidc"))


def _session(identity: Identity) -> JSONResponse:
    """Stands in for accounts' session maker: answers the identity it was handed."""
    return JSONResponse({**asdict(identity), "roles_by_project": dict(identity.roles_by_project)})


@pytest.fixture(scope="module")
def app(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    config = OidcConfig(
        issuer=provider.issuer,
        client_id="forgeml",
        client_secret_env=SECRET_ENV,
        redirect_uri=REDIRECT_URI,
        group_roles={"vision": {"vision-leads": "maintainer"}},
        allow_private_network=True,
    )
    workspace = Workspace(Settings(home=tmp_path_factory.mktemp("home"), user="tester"))
    try:
        app = create_app(workspace)
        app.include_router(oidc_router(config, _session))
        yield app
    finally:
        workspace.close()


@pytest.fixture
def browser(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv(SECRET_ENV, CLIENTS["forgeml"])
    with TestClient(app, base_url="http://localhost") as client:
        yield client


def _start(browser: TestClient) -> str:
    response = browser.get(f"{PREFIX}/login", follow_redirects=False)
    assert response.status_code == 302
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and f"Path={PREFIX}" in cookie
    return str(response.headers["location"])


def test_a_browser_signs_in_through_the_provider(browser: TestClient) -> None:
    query = browser_sign_in(_start(browser), "alice", "correct horse battery staple")
    response = browser.get(f"{PREFIX}/callback", params=query)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["subject"], body["email"]) == ("alice", "alice@example.org")
    assert body["groups"] == ["ml-engineers", "vision-leads"]
    assert body["roles_by_project"] == {"vision": "maintainer"}
    assert COOKIE not in browser.cookies
    again = browser.get(f"{PREFIX}/callback", params=query)
    assert again.status_code == 401
    assert "started no sign-in" in again.json()["error"]


def test_a_callback_carried_to_another_browser_is_refused(
    browser: TestClient, app: FastAPI
) -> None:
    attackers_query = browser_sign_in(_start(browser), "bob", "hunter2 hunter2")
    with TestClient(app, base_url="http://localhost") as victim:
        victim_url = victim.get(f"{PREFIX}/login", follow_redirects=False).headers["location"]
        assert parse_qs(urlsplit(victim_url).query)["state"] != [attackers_query["state"]]
        response = victim.get(f"{PREFIX}/callback", params=attackers_query)
    assert response.status_code == 401
    assert "does not match the sign-in this browser started" in response.json()["error"]


def test_a_callback_without_a_started_sign_in_is_refused(app: FastAPI) -> None:
    with TestClient(app, base_url="http://localhost") as stranger:
        response = stranger.get(f"{PREFIX}/callback", params={"state": "s", "code": "c"})
        assert response.status_code == 401
        assert "started no sign-in" in response.json()["error"]
        stranger.cookies.set(COOKIE, "a-state-never-issued", path=PREFIX)
        response = stranger.get(f"{PREFIX}/callback", params={"state": "s", "code": "c"})
    assert response.status_code == 401
    assert "unknown, expired or finished" in response.json()["error"]


def test_the_sign_in_routes_are_declared_public(app: FastAPI) -> None:
    routes = {
        r.path: route_permission(r) for r in api_routes(app.routes) if r.path.startswith(PREFIX)
    }
    assert routes == {f"{PREFIX}/login": PUBLIC, f"{PREFIX}/callback": PUBLIC}


def test_pending_logins_are_taken_once_and_expire() -> None:
    now = [100.0]
    pending = PendingLogins(ttl_s=60, clock=lambda: now[0], max_pending=2)

    def started(state: str) -> LoginState:
        return LoginState(state=state, nonce="n", code_verifier="v" * 43, created_at=now[0])

    pending.put(started("a"))
    assert pending.take("a") == started("a")
    assert pending.take("a") is None
    pending.put(started("b"))
    now[0] += 61
    assert pending.take("b") is None
    pending.put(started("c"))
    pending.put(started("d"))
    with pytest.raises(ServiceUnavailableError, match="Too many sign-ins"):
        pending.put(started("e"))
    now[0] += 61  # c and d expire, and make room
    pending.put(started("e"))
    assert pending.take("e") is not None
