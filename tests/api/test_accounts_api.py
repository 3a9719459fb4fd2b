"""Sign-in, accounts, projects and tokens over HTTP, and the attacks on them replayed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import Response
from fastapi.testclient import TestClient
from sqlalchemy import select

from forgeml.api import api_in_thread, create_app
from forgeml.api._accounts import SESSION_COOKIE, AccountsAuthorizer, choose_authorizer
from forgeml.api._authz import SingleUser, public
from forgeml.api._oidc_accounts import account_name, oidc_sign_in
from forgeml.auth import (
    get_user,
    list_members,
    set_disabled,
)
from forgeml.auth.oidc import Identity
from forgeml.core.errors import UsageError
from forgeml.core.store import AlertRecord, AuditEvent, LoginAttemptRecord, UserRecord
from tests.api._accounts_app import accounts_client, seed
from tests.auth._accounts import PASSWORD, fast_settings

NEW_PASSWORD = "another long passphrase"


@pytest.fixture
def api(workspace, tmp_path):
    client, settings, clock = accounts_client(workspace, tmp_path)
    tokens = seed(
        workspace,
        settings,
        {
            "alice": ("owner", "default"),
            "erin": ("admin", "default"),
            "dan": ("developer", "default"),
        },
    )
    with client:
        yield client, tokens, clock


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _login(client: TestClient, name: str, password: str = PASSWORD, **headers: str):
    return client.post(
        "/api/v1/auth/login", json={"name": name, "password": password}, headers=headers
    )


def test_login_sets_a_strict_http_only_cookie_and_logout_ends_the_session(api) -> None:
    client, _, _ = api
    response = _login(client, "dan")
    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert client.get("/api/v1/auth/me").json()["roles"] == {"default": "developer"}
    stolen = client.cookies.get(SESSION_COOKIE)

    assert client.post("/api/v1/auth/logout").json() == {"status": "signed out"}
    assert client.get("/api/v1/auth/me").status_code == 401
    client.cookies.set(SESSION_COOKIE, stolen)
    refused = client.get("/api/v1/auth/me")
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]


def test_a_session_expires(api) -> None:
    client, _, clock = api
    _login(client, "dan")
    clock.now += timedelta(hours=12)
    assert "expired" in client.get("/api/v1/auth/me").json()["error"]


def test_a_bad_authorization_header_is_401(api) -> None:
    client, tokens, _ = api
    for header in ("Basic abc", "Bearer", f"Token {tokens['dan']}", "Bearer fml_nonsense"):
        response = client.get("/api/v1/auth/me", headers={"Authorization": header})
        assert response.status_code == 401, header
        assert response.json()["error"]


def test_mlflow_cve_2025_1473_a_cookie_change_from_another_origin_is_refused(api) -> None:
    client, _, _ = api
    _login(client, "dan")
    body = {"name": "laptop"}
    evil = client.post("/api/v1/tokens", json=body, headers={"Origin": "https://evil.example"})
    assert evil.status_code == 403
    same = client.post("/api/v1/tokens", json=body, headers={"Origin": "http://localhost"})
    assert same.status_code == 201
    assert client.get("/api/v1/tokens").json()["tokens"][0]["name"] == "laptop"


def test_label_studio_cve_2023_43791_no_default_session_key(workspace, tmp_path) -> None:
    """Each install makes its own key (0600); a cookie signed elsewhere is refused."""
    ours, settings, _ = accounts_client(workspace, tmp_path / "a")
    theirs, _, _ = accounts_client(workspace, tmp_path / "b")
    seed(workspace, settings, {"dan": ("developer", "default")})
    key_file = tmp_path / "a" / "keys" / "session.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    with ours, theirs:
        _login(ours, "dan")
        cookie = ours.cookies.get(SESSION_COOKIE)
        assert ours.get("/api/v1/auth/me").status_code == 200
        theirs.cookies.set(SESSION_COOKIE, cookie)
        refused = theirs.get("/api/v1/auth/me")
        assert refused.status_code == 401
        assert "not issued by this server" in refused.json()["error"]
        token = cookie.rsplit(".", 1)[0]
        theirs.cookies.set(SESSION_COOKIE, f"{token}.{'0' * 64}")
        assert theirs.get("/api/v1/auth/me").status_code == 401


def test_zenml_cve_2024_25723_mass_assignment_cannot_make_a_developer_admin(api, workspace) -> None:
    client, tokens, _ = api
    dan = _bearer(tokens["dan"])
    for field in ({"role": "admin"}, {"is_admin": True}, {"roles": {"default": "owner"}}):
        response = client.patch("/api/v1/auth/me", json=field, headers=dan)
        assert response.status_code == 422
        assert next(iter(field)) in response.json()["error"]
    promote = client.put(
        "/api/v1/projects/default/members/dan", json={"role": "admin"}, headers=dan
    )
    assert promote.status_code == 403
    sneaky = client.post(
        "/api/v1/tokens",
        json={"name": "t", "scopes": ["users:manage"], "role": "admin"},
        headers=dan,
    )
    assert sneaky.status_code == 422
    assert {m["user"]: m["role"] for m in list_members(workspace, "default")}["dan"] == "developer"


def test_an_admin_cannot_make_anyone_owner_or_touch_an_owner(api, workspace) -> None:
    client, tokens, _ = api
    erin = _bearer(tokens["erin"])
    for who in ("erin", "dan"):
        response = client.put(
            f"/api/v1/projects/default/members/{who}", json={"role": "owner"}, headers=erin
        )
        assert response.status_code == 403, who
    assert client.delete("/api/v1/projects/default/members/alice", headers=erin).status_code == 403
    assert (
        client.patch("/api/v1/users/alice", json={"disabled": True}, headers=erin).status_code
        == 403
    )
    assert not get_user(workspace, "alice")["disabled"]
    ok = client.put(
        "/api/v1/projects/default/members/dan", json={"role": "maintainer"}, headers=erin
    )
    assert ok.status_code == 200


def test_zenml_cve_2024_2035_a_disabled_account_cannot_reactivate_itself(api, workspace) -> None:
    client, tokens, _ = api
    _login(client, "dan")
    assert client.patch(
        "/api/v1/users/dan", json={"disabled": True}, headers=_bearer(tokens["alice"])
    ).json()["disabled"]

    assert client.get("/api/v1/auth/me").status_code == 401
    for headers in ({}, _bearer(tokens["dan"])):
        again = client.patch("/api/v1/users/dan", json={"disabled": False}, headers=headers)
        assert again.status_code == 401
        own = client.patch("/api/v1/auth/me", json={"disabled": False}, headers=headers)
        assert own.status_code == 401
    client.cookies.clear()
    assert _login(client, "dan").status_code == 401
    assert get_user(workspace, "dan")["disabled"]


def test_zenml_cve_2024_2213_no_account_takeover_through_user_update(api, workspace) -> None:
    client, tokens, _ = api
    takeover = {"password": NEW_PASSWORD}
    assert client.patch("/api/v1/users/alice", json=takeover).status_code == 401
    dan = _bearer(tokens["dan"])
    assert client.patch("/api/v1/users/alice", json=takeover, headers=dan).status_code == 403
    erin = _bearer(tokens["erin"])
    assert client.patch("/api/v1/users/alice", json=takeover, headers=erin).status_code == 403
    # a stolen session or token cannot change the password without the current one
    assert client.patch("/api/v1/auth/me", json=takeover, headers=dan).status_code == 403
    wrong = {**takeover, "current_password": "not the password"}
    assert client.patch("/api/v1/auth/me", json=wrong, headers=dan).status_code == 403
    assert _login(client, "alice").status_code == 200
    right = {**takeover, "current_password": PASSWORD}
    assert client.patch("/api/v1/auth/me", json=right, headers=dan).status_code == 200
    client.cookies.clear()
    assert _login(client, "dan", NEW_PASSWORD).status_code == 200


def test_fleet_cve_2026_46356_spoofed_forwarding_headers_do_not_escape_the_login_limit(
    workspace, tmp_path
) -> None:
    client, settings, _ = accounts_client(
        workspace, tmp_path, login_failures_per_address=3, login_failures_per_user=100
    )
    seed(workspace, settings, {"dan": ("developer", "default")})
    with client:
        for i in range(3):
            spoof = {"X-Forwarded-For": f"198.51.100.{i}", "True-Client-IP": f"203.0.113.{i}"}
            assert _login(client, f"guess{i}", "wrong password!", **spoof).status_code == 401
        fresh = {"X-Forwarded-For": "192.0.2.77", "True-Client-IP": "192.0.2.78"}
        limited = _login(client, "dan", **fresh)
        assert limited.status_code == 429
        assert "this address" in limited.json()["error"]
        assert int(limited.headers["Retry-After"]) >= 1


def test_fleet_cve_2026_46356_behind_a_trusted_proxy_the_client_cannot_pick_its_address(
    workspace, tmp_path
) -> None:
    # TestClient's peer is "testclient": here it plays the proxy the server was told of
    client, settings, _ = accounts_client(
        workspace, tmp_path, login_failures_per_address=2, trusted_proxies=["testclient"]
    )
    seed(workspace, settings, {"dan": ("developer", "default")})
    with client:
        for i in range(2):
            # the client writes a fresh address each time; the proxy appends the real one
            forwarded = {"X-Forwarded-For": f"198.51.100.{i}, 192.0.2.10"}
            assert _login(client, f"guess{i}", "wrong password!", **forwarded).status_code == 401
        again = {"X-Forwarded-For": "198.51.100.99, 192.0.2.10"}
        assert _login(client, "dan", **again).status_code == 429
        other_client = {"X-Forwarded-For": "192.0.2.11"}
        assert _login(client, "dan", **other_client).status_code == 200


def test_an_account_is_limited_whatever_address_it_is_tried_from(workspace, tmp_path) -> None:
    client, settings, _ = accounts_client(
        workspace, tmp_path, login_failures_per_user=2, trusted_proxies=["testclient"]
    )
    seed(workspace, settings, {"dan": ("developer", "default")})
    with client:
        for i in range(2):
            assert (
                _login(
                    client, "dan", "wrong password!", **{"X-Forwarded-For": f"192.0.2.{i}"}
                ).status_code
                == 401
            )
        limited = _login(client, "dan", **{"X-Forwarded-For": "192.0.2.200"})
        assert limited.status_code == 429 and "this account" in limited.json()["error"]


def test_clearml_cve_2024_24595_no_credential_is_stored_in_plain_text(api, workspace) -> None:
    client, tokens, _ = api
    alice = _bearer(tokens["alice"])
    created = client.post(
        "/api/v1/users",
        json={"name": "frank", "password": NEW_PASSWORD, "role": "viewer"},
        headers=alice,
    )
    assert created.status_code == 201, created.text
    assert _login(client, "frank", NEW_PASSWORD).status_code == 200
    token = client.post("/api/v1/tokens", json={"name": "ci"}).json()["token"]
    secret = token.split("_", 2)[2]
    home = Path(workspace.settings.home)
    stored = b"".join(path.read_bytes() for path in home.glob("forgeml.db*"))
    assert stored
    for plain in (NEW_PASSWORD, PASSWORD, secret, tokens["alice"].split("_", 2)[2]):
        assert plain.encode() not in stored
    with workspace.store.session() as session:
        hashed = session.scalar(select(UserRecord.password_hash).where(UserRecord.name == "frank"))
    assert hashed.startswith("$argon2id$")
    assert "password" not in str(created.json()).replace("has_password", "")


def test_a_service_account_gets_a_scoped_token_shown_once(api, workspace) -> None:
    client, tokens, _ = api
    alice = _bearer(tokens["alice"])
    made = client.post(
        "/api/v1/users", json={"name": "ci", "kind": "service", "role": "developer"}, headers=alice
    )
    assert made.status_code == 201 and made.json()["kind"] == "service"
    issued = client.post(
        "/api/v1/users/ci/tokens",
        json={"name": "build", "scopes": ["alerts:read"], "expires_days": 7},
        headers=alice,
    )
    assert issued.status_code == 201
    token = issued.json()["token"]
    assert client.get("/api/v1/alerts", headers=_bearer(token)).status_code == 200
    assert client.post("/api/v1/alerts/x/ack", headers=_bearer(token)).status_code == 403
    listed = client.get("/api/v1/users/ci/tokens", headers=alice).json()["tokens"]
    assert [t["name"] for t in listed] == ["build"] and "token" not in listed[0]
    revoked = client.delete(f"/api/v1/users/ci/tokens/{listed[0]['id']}", headers=alice)
    assert revoked.status_code == 200
    assert client.get("/api/v1/alerts", headers=_bearer(token)).status_code == 401
    person = client.post("/api/v1/users/dan/tokens", json={"name": "x"}, headers=alice)
    assert person.status_code == 422 and "make their own tokens" in person.json()["error"]


def test_a_scoped_token_cannot_mint_a_broader_one(api) -> None:
    client, tokens, _ = api
    scoped = client.post(
        "/api/v1/tokens",
        json={"name": "s", "scopes": ["account:write", "alerts:read"]},
        headers=_bearer(tokens["dan"]),
    ).json()["token"]
    broader = client.post(
        "/api/v1/tokens", json={"name": "b", "scopes": ["alerts:ack"]}, headers=_bearer(scoped)
    )
    assert broader.status_code == 403
    inherited = client.post("/api/v1/tokens", json={"name": "i"}, headers=_bearer(scoped))
    assert inherited.json()["scopes"] == ["account:write", "alerts:read"]


def test_projects_isolate_their_members(api) -> None:
    client, tokens, _ = api
    dan = _bearer(tokens["dan"])
    assert client.post("/api/v1/projects", json={"name": "vision"}, headers=dan).status_code == 403
    alice = _bearer(tokens["alice"])
    assert (
        client.post("/api/v1/projects", json={"name": "vision"}, headers=alice).status_code == 201
    )
    assert client.get("/api/v1/projects/vision/members", headers=dan).status_code == 403
    added = client.put(
        "/api/v1/projects/vision/members/dan", json={"role": "viewer"}, headers=alice
    )
    assert added.status_code == 200
    members = client.get("/api/v1/projects/vision/members", headers=dan).json()["members"]
    assert {m["user"]: m["role"] for m in members} == {"alice": "owner", "dan": "viewer"}
    # a `?project=` the route does not declare names no project: dan acts in `default`, as
    # its developer (who may ack: the alert is unknown), not as vision's viewer (a request
    # picks its project with the X-Forgeml-Project header)
    assert client.get("/api/v1/alerts?project=vision", headers=dan).status_code == 200
    assert client.post("/api/v1/alerts/x/ack?project=vision", headers=dan).status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/api/v1/users", {"name": "x" * 129}, "name"),
        ("/api/v1/users", {"name": "x", "kind": "root"}, "kind"),
        ("/api/v1/users", {"name": "x", "disabled": False}, "disabled"),
        ("/api/v1/projects", {"name": 5}, "name"),
        ("/api/v1/tokens", {"name": "t", "expires_days": -1}, "expires_days"),
    ],
)
def test_a_bad_body_is_422_naming_the_field_and_changes_nothing(
    api, workspace, path, body, named
) -> None:
    client, tokens, _ = api
    with workspace.store.session() as session:
        before = session.scalar(select(AuditEvent.seq).order_by(AuditEvent.seq.desc()).limit(1))
    response = client.post(path, json=body, headers=_bearer(tokens["alice"]))
    assert response.status_code == 422
    assert named in response.json()["error"]
    with workspace.store.session() as session:
        after = session.scalar(select(AuditEvent.seq).order_by(AuditEvent.seq.desc()).limit(1))
    assert after == before


def test_audit_events_of_api_changes_name_the_caller(api, workspace) -> None:
    client, tokens, clock = api
    with workspace.store.session() as session:
        session.add(AlertRecord(
            id="a1", fingerprint="f", active_key="forgeml:f", rule="HighLoss", labels={},
            annotations={}, state="firing", started_at=clock.now, source="forgeml",
        ))  # fmt: skip
    erin = _bearer(tokens["erin"])
    assert client.post("/api/v1/alerts/a1/ack", headers=erin).json()["acked_by"] == "erin"
    client.put("/api/v1/projects/default/members/dan", json={"role": "viewer"}, headers=erin)
    client.post("/api/v1/tokens", json={"name": "t"}, headers=_bearer(tokens["dan"]))
    with workspace.store.session() as session:
        events = [
            (e.actor, e.action)
            for e in session.scalars(select(AuditEvent).order_by(AuditEvent.seq))
        ]
    assert events[-3:] == [
        ("erin", "alert.ack"),
        ("erin", "project.member.set"),
        ("dan", "token.create"),
    ]


def test_create_app_asks_for_sign_in_once_an_account_exists(
    workspace, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("FORGEML_AUTH_SESSION_KEY_FILE", str(tmp_path / "k" / "session.key"))
    from forgeml.auth._settings import get_auth_settings

    get_auth_settings.cache_clear()
    try:
        assert isinstance(choose_authorizer(workspace), SingleUser)
        with pytest.raises(UsageError, match="No account exists"):
            choose_authorizer(workspace, "accounts")
        seed(workspace, fast_settings(tmp_path), {"dan": ("developer", "default")})
        assert isinstance(choose_authorizer(workspace, "single-user"), SingleUser)
        with TestClient(create_app(workspace), base_url="http://localhost") as client:
            assert isinstance(client.app.state.authorizer, AccountsAuthorizer)
            assert client.get("/api/v1/alerts").status_code == 401
        with pytest.raises(UsageError, match="Unknown auth mode"):
            choose_authorizer(workspace, "none")
    finally:
        get_auth_settings.cache_clear()


def test_login_without_accounts_is_one_sentence(workspace) -> None:
    with TestClient(
        create_app(workspace, SingleUser("tester")), base_url="http://localhost"
    ) as client:
        response = client.post("/api/v1/auth/login", json={"name": "a", "password": "b"})
        assert response.status_code == 422
        assert "without accounts" in response.json()["error"]
        assert client.get("/api/v1/auth/me").json()["name"] == "tester"


def test_an_oidc_identity_signs_in_with_its_groups_roles(workspace, tmp_path) -> None:
    client, _, _ = accounts_client(workspace, tmp_path)
    seed(workspace, fast_settings(tmp_path), {"alice": ("owner", "default")})
    app = client.app
    on_identity = oidc_sign_in(app.state.authorizer, secure=False)
    identity = Identity(
        issuer="https://idp.example", subject="s-1", email="gina.r@example.org", name="Gina",
        groups=("ml",), roles_by_project={"default": "viewer", "vision": "developer"},
    )  # fmt: skip

    @app.post("/test/callback", dependencies=[public()])
    def callback() -> Response:
        return on_identity(identity)

    with client:
        signed_in = client.post("/test/callback")
        assert signed_in.json()["user"] == "gina.r"
        assert "SameSite=strict" in signed_in.headers["set-cookie"]
        me = client.get("/api/v1/auth/me").json()
        assert (me["name"], me["via"], me["external"]) == ("gina.r", "session", True)
        assert me["roles"] == {"default": "viewer", "vision": "developer"}
        set_disabled(workspace, "gina.r", True, actor="alice")
        client.cookies.clear()
        refused = client.post("/test/callback")
        assert refused.status_code == 401 and "disabled" in refused.json()["error"]
        assert "forgeml_session" not in refused.headers.get("set-cookie", "")


@pytest.mark.parametrize(
    ("email", "name", "subject", "expected"),
    [
        ("ann@x.org", "Ann", "1", "ann"),
        (None, "Ann Lee", "1", "Ann-Lee"),
        (None, None, "auth0|abc", "auth0-abc"),
        ("../@x.org", "..", "//", "user"),
    ],
)
def test_an_oidc_account_name_is_a_plain_identifier(email, name, subject, expected) -> None:
    identity = Identity("https://idp", subject, email, name, (), {})
    assert account_name(identity) == expected


def test_forgeml_server_s_api_thread_signs_in_over_real_http(workspace, tmp_path) -> None:
    settings = fast_settings(tmp_path, login_failures_per_address=1)
    seed(workspace, settings, {"dan": ("developer", "default")})
    authorizer = AccountsAuthorizer(workspace, settings)
    with api_in_thread(workspace, authorizer=authorizer) as url, httpx.Client(base_url=url) as http:
        assert http.get("/api/v1/alerts").status_code == 401
        login = {"name": "dan", "password": PASSWORD}
        assert http.post("/api/v1/auth/login", json=login).status_code == 200
        assert http.get("/api/v1/alerts").status_code == 200
        wrong = {"name": "dan", "password": "wrong password!"}
        spoof = {"X-Forwarded-For": "192.0.2.1"}
        assert http.post("/api/v1/auth/login", json=wrong, headers=spoof).status_code == 401
        limited = http.post(
            "/api/v1/auth/login", json=login, headers={"X-Forwarded-For": "192.0.2.2"}
        )
        assert limited.status_code == 429
    with workspace.store.session() as session:
        addresses = set(session.scalars(select(LoginAttemptRecord.address)))
    assert addresses == {"127.0.0.1"}


def test_a_project_s_owner_cannot_reach_accounts_beyond_it(api, workspace, tmp_path) -> None:
    """users:manage and tokens:manage held in one project (named by ?project=) do not
    reach an account that belongs elsewhere, or to no project."""
    client, tokens, _ = api
    bob = seed(workspace, fast_settings(tmp_path), {"bob": ("owner", "vision")})["bob"]
    client.post(
        "/api/v1/users", json={"name": "ci", "kind": "service"}, headers=_bearer(tokens["alice"])
    )
    headers = _bearer(bob)
    attempts = [
        ("PATCH", "/api/v1/users/alice?project=vision", {"password": NEW_PASSWORD}),
        ("PATCH", "/api/v1/users/dan?project=vision", {"disabled": True}),
        ("POST", "/api/v1/users/ci/tokens?project=vision", {"name": "stolen"}),
        ("GET", "/api/v1/users/ci/tokens?project=vision", None),
    ]
    for method, url, body in attempts:
        response = client.request(method, url, json=body, headers=headers)
        assert response.status_code == 403, (url, response.text)
        assert "in the project 'default'" in response.json()["error"]
    assert not get_user(workspace, "dan")["disabled"]
    assert _login(client, "alice").status_code == 200


def test_the_last_owner_is_kept_and_is_a_409(api) -> None:
    client, tokens, _ = api
    alice = _bearer(tokens["alice"])
    changes = [
        ("delete", "/api/v1/projects/default/members/alice", None),
        ("put", "/api/v1/projects/default/members/alice", {"role": "viewer"}),
        ("patch", "/api/v1/users/alice", {"disabled": True}),
    ]
    for method, url, body in changes:
        kept = client.request(method, url, json=body, headers=alice)
        assert kept.status_code == 409, (method, kept.text)
        assert "alice is the last owner of the project 'default'" in kept.json()["error"]
    assert client.get("/api/v1/auth/me", headers=alice).json()["roles"] == {"default": "owner"}


def test_zenml_cve_2024_2213_nobody_raises_their_own_role(api) -> None:
    client, tokens, _ = api
    for who, role in (("erin", "owner"), ("dan", "maintainer")):
        url = f"/api/v1/projects/default/members/{who}"
        raised = client.put(url, json={"role": role}, headers=_bearer(tokens[who]))
        assert raised.status_code == 403, raised.text
        own = client.patch("/api/v1/auth/me", json={"role": role}, headers=_bearer(tokens[who]))
        assert own.status_code == 422 and "role" in own.json()["error"]
    # a project of one's own grants nothing in another
    assert client.post("/api/v1/projects", json={"name": "nlp"}, headers=_bearer(tokens["erin"]))
    raised = client.put(
        "/api/v1/projects/default/members/erin", json={"role": "owner"},
        headers=_bearer(tokens["erin"]),
    )  # fmt: skip
    assert raised.status_code == 403
    roles = client.get("/api/v1/auth/me", headers=_bearer(tokens["erin"])).json()["roles"]
    assert roles == {"default": "admin", "nlp": "owner"}
