"""Authorization in one place: every route declares a permission or is public."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from forgeml.api import create_app
from forgeml.api._authz import PUBLIC, Principal, api_routes, public, require, route_permission
from forgeml.core.config import Settings
from forgeml.core.errors import PermissionDeniedError
from forgeml.core.workspace import Workspace


def test_every_route_declares_its_permission(tmp_path) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        app = create_app(workspace)
        routes = list(api_routes(app.routes))
        assert routes
        undeclared = [route.path for route in routes if route_permission(route) is None]
        assert undeclared == []
        for route in routes:
            permission = route_permission(route)
            assert permission == PUBLIC or permission.count(":") == 1, route.path
    finally:
        workspace.close()


def test_route_permission_reads_the_declaration() -> None:
    app = FastAPI()

    @app.get("/a", dependencies=[require("datasets:read")])
    def a() -> None: ...

    @app.get("/b", dependencies=[public()])
    def b() -> None: ...

    @app.get("/c")
    def c() -> None: ...

    found = {r.path: route_permission(r) for r in api_routes(app.routes)}
    assert found == {"/a": "datasets:read", "/b": PUBLIC, "/c": None}


def test_a_permission_must_name_resource_and_action() -> None:
    with pytest.raises(ValueError, match="resource:action"):
        require("datasets")
    with pytest.raises(ValueError, match="resource:action"):
        require(PUBLIC)


class _Refuse:
    """An authorizer that refuses everything but one permission."""

    def __init__(self, allowed: str) -> None:
        self.allowed = allowed
        self.asked: list[str] = []

    def authorize(self, request: Request, permission: str) -> Principal:
        self.asked.append(permission)
        if permission != self.allowed:
            raise PermissionDeniedError(f"You may not {permission}.")
        return Principal("alice")

    def allows(self, request: Request, permission: str, project: str) -> bool:
        return permission == self.allowed


def test_the_app_asks_its_authorizer_for_each_route(tmp_path) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    authorizer = _Refuse("alerts:read")
    try:
        with TestClient(create_app(workspace, authorizer), base_url="http://localhost") as client:
            assert client.get("/api/v1/alerts").status_code == 200
            refused = client.post("/api/v1/alerts/x/ack")
            assert refused.status_code == 403
            assert refused.json() == {
                "error": "You may not alerts:ack.",
                "code": "permission_denied",
            }
        assert authorizer.asked == ["alerts:read", "alerts:ack"]
    finally:
        workspace.close()


def test_anything_unknown_is_denied_on_every_route(tmp_path) -> None:
    """Every operation in the OpenAPI document, asked by a caller the authorizer refuses,
    is answered 403 unless its route is public: nothing answers before the check."""
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    authorizer = _Refuse("nothing:allowed")
    try:
        app = create_app(workspace, authorizer)
        declared = {
            (route.path, method): route_permission(route)
            for route in api_routes(app.routes)
            for method in route.methods
        }
        with TestClient(app, base_url="http://localhost") as client:
            operations = client.get("/openapi.json").json()["paths"]
            asked = 0
            for path, methods in operations.items():
                url = re.sub(r"\{[^}]+\}", "x", path)
                for method in methods:
                    response = client.request(method.upper(), url, json={})
                    if declared[(path, method.upper())] == PUBLIC:
                        assert response.status_code != 403, (method, path)
                    else:
                        assert response.status_code == 403, (method, path, response.text)
                        asked += 1
        assert asked == len(authorizer.asked) > 0
    finally:
        workspace.close()


def test_no_route_and_a_wrong_method_are_json_errors(tmp_path) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        with TestClient(create_app(workspace), base_url="http://localhost") as client:
            missing = client.get("/api/v1/runs/a%2Fb/metrics")  # %2F decodes to a path
            assert missing.status_code == 404
            assert missing.json() == {"error": "Nothing is served at /api/v1/runs/a/b/metrics."}
            wrong = client.delete("/api/v1/alerts")
            assert wrong.status_code == 405
            assert wrong.json() == {"error": "DELETE is not allowed on /api/v1/alerts."}
    finally:
        workspace.close()
