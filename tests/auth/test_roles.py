from __future__ import annotations

import itertools

import pytest

from forgeml.api import create_app
from forgeml.api._authz import PUBLIC, SingleUser, api_routes, route_permission
from forgeml.auth.roles import (
    ACCOUNT_PERMISSIONS,
    PERMISSIONS,
    ROLES,
    check_role,
    check_scopes,
    role_permissions,
)
from forgeml.core.errors import UsageError


def test_each_role_holds_everything_the_one_below_it_holds() -> None:
    order = ["viewer", "developer", "maintainer", "admin", "owner"]
    assert list(ROLES) == order
    for lower, higher in itertools.pairwise(order):
        assert ROLES[lower] < ROLES[higher], (lower, higher)


def test_permissions_are_resource_action_pairs() -> None:
    for permission in PERMISSIONS:
        resource, action = permission.split(":")
        assert resource and action and resource.islower()


def test_the_issue_s_named_permissions_are_in_the_table() -> None:
    named = {"datasets:read", "jobs:submit", "models:promote", "deployments:traffic", "keys:manage"}
    assert named <= PERMISSIONS
    assert {"users:manage", "projects:manage", "tokens:manage", "audit:read"} <= ROLES["admin"]


def test_only_an_owner_holds_everything() -> None:
    assert ROLES["owner"] | ACCOUNT_PERMISSIONS == PERMISSIONS
    assert "projects:delete" not in ROLES["admin"]


def test_every_permission_a_route_declares_is_in_the_table(workspace) -> None:
    app = create_app(workspace, SingleUser("tester"))
    declared = {route_permission(route) for route in api_routes(app.routes)} - {PUBLIC}
    assert declared
    assert declared <= PERMISSIONS, declared - PERMISSIONS


def test_an_unknown_role_holds_nothing() -> None:
    assert role_permissions("superuser") == frozenset()
    assert role_permissions(None) == frozenset()
    with pytest.raises(UsageError, match="Unknown role 'superuser'"):
        check_role("superuser")


def test_a_scope_must_name_known_permissions() -> None:
    assert check_scopes(["runs:read", "datasets:read", "runs:read"]) == [
        "datasets:read",
        "runs:read",
    ]
    with pytest.raises(UsageError, match="Unknown permission 'datasets:\\*'"):
        check_scopes(["datasets:*"])
    with pytest.raises(UsageError, match="at least one permission"):
        check_scopes([])
