from __future__ import annotations

import pytest
from sqlalchemy import select

from forgeml.auth import (
    add_member,
    create_project,
    create_user,
    find_or_create_external_user,
    list_members,
    list_projects,
    remove_member,
    role_permissions,
    set_disabled,
    set_project_roles,
)
from forgeml.core.errors import (
    AlreadyExistsError,
    InvalidNameError,
    LastOwnerError,
    NotFoundError,
    PermissionDeniedError,
    UsageError,
)
from forgeml.core.store import AuditEvent


def _roles(workspace, project: str) -> dict[str, str]:
    return {m["user"]: m["role"] for m in list_members(workspace, project)}


def test_projects_and_members(any_workspace) -> None:
    for name in ("alice", "bob"):
        create_user(any_workspace, name, actor="tester")
    create_project(any_workspace, "vision", actor="tester", owner="alice")
    add_member(any_workspace, "vision", "bob", "developer", actor="alice")
    add_member(any_workspace, "vision", "bob", "viewer", actor="alice")

    assert _roles(any_workspace, "vision") == {"alice": "owner", "bob": "viewer"}
    assert [(p["name"], p["members"]) for p in list_projects(any_workspace)] == [("vision", 2)]
    remove_member(any_workspace, "vision", "bob", actor="alice")
    assert _roles(any_workspace, "vision") == {"alice": "owner"}
    with any_workspace.store.session() as session:
        events = [(e.actor, e.action) for e in session.scalars(select(AuditEvent))][-3:]
    assert events == [
        ("alice", "project.member.set"),
        ("alice", "project.member.set"),
        ("alice", "project.member.remove"),
    ]


def test_project_errors_are_one_sentence(any_workspace) -> None:
    create_user(any_workspace, "alice", actor="tester")
    create_project(any_workspace, "vision", actor="tester")
    with pytest.raises(AlreadyExistsError, match="'vision' exists already"):
        create_project(any_workspace, "vision", actor="tester")
    with pytest.raises(InvalidNameError):
        create_project(any_workspace, "../etc", actor="tester")
    with pytest.raises(NotFoundError, match="No project is called 'nlp'"):
        add_member(any_workspace, "nlp", "alice", "viewer", actor="tester")
    with pytest.raises(NotFoundError, match="No account is called 'zed'"):
        add_member(any_workspace, "vision", "zed", "viewer", actor="tester")
    with pytest.raises(UsageError, match="Unknown role"):
        add_member(any_workspace, "vision", "alice", "root", actor="tester")
    with pytest.raises(NotFoundError, match="not a member"):
        remove_member(any_workspace, "vision", "alice", actor="tester")


def test_nobody_grants_or_takes_away_more_than_they_hold(any_workspace) -> None:
    for name in ("alice", "bob"):
        create_user(any_workspace, name, actor="tester")
    add_member(any_workspace, "default", "alice", "owner", actor="tester")
    admin = role_permissions("admin")
    with pytest.raises(PermissionDeniedError, match="role owner"):
        add_member(any_workspace, "default", "bob", "owner", actor="carol", granter=admin)
    with pytest.raises(PermissionDeniedError, match="role owner"):
        add_member(any_workspace, "default", "alice", "viewer", actor="carol", granter=admin)
    with pytest.raises(PermissionDeniedError, match="role owner"):
        remove_member(any_workspace, "default", "alice", actor="carol", granter=admin)
    add_member(any_workspace, "default", "bob", "admin", actor="carol", granter=admin)
    assert _roles(any_workspace, "default") == {"alice": "owner", "bob": "admin"}


def test_an_external_identity_finds_its_account_again(any_workspace) -> None:
    create_user(any_workspace, "alice", actor="tester")
    first = find_or_create_external_user(
        any_workspace, "https://idp", "sub-1", name="alice", email="a@x.org"
    )
    again = find_or_create_external_user(any_workspace, "https://idp", "sub-1", name="other")
    other_idp = find_or_create_external_user(any_workspace, "https://idp2", "sub-1", name="alice")

    assert first["name"] == again["name"] == "alice-2"
    assert first["external"] and first["email"] == "a@x.org"
    assert other_idp["name"] == "alice-3"


def test_group_roles_replace_their_own_memberships_and_never_manual_ones(any_workspace) -> None:
    create_user(any_workspace, "alice", actor="tester")
    create_project(any_workspace, "vision", actor="tester")
    add_member(any_workspace, "vision", "alice", "viewer", actor="tester")

    held = set_project_roles(
        any_workspace, "alice", {"vision": "admin", "nlp": "developer"}, actor="oidc"
    )
    assert held == {"vision": "viewer", "nlp": "developer"}

    held = set_project_roles(any_workspace, "alice", {"speech": "maintainer"}, actor="oidc")
    assert held == {"vision": "viewer", "speech": "maintainer"}
    with pytest.raises(UsageError):
        set_project_roles(any_workspace, "alice", {"nlp": "god"}, actor="oidc")


def test_the_last_owner_cannot_be_removed_demoted_or_disabled(any_workspace) -> None:
    for name in ("alice", "bob"):
        create_user(any_workspace, name, actor="tester")
    create_project(any_workspace, "vision", actor="tester", owner="alice")
    add_member(any_workspace, "vision", "bob", "owner", actor="alice")
    set_disabled(any_workspace, "bob", True, actor="alice")
    # bob is an owner, but a disabled one: alice is the last who can manage the project
    with pytest.raises(LastOwnerError, match="alice is the last owner of the project 'vision'"):
        remove_member(any_workspace, "vision", "alice", actor="alice")
    with pytest.raises(LastOwnerError, match="Cannot make alice admin"):
        add_member(any_workspace, "vision", "alice", "admin", actor="alice")
    with pytest.raises(LastOwnerError, match="Cannot disable alice"):
        set_disabled(any_workspace, "alice", True, actor="tester")
    assert _roles(any_workspace, "vision") == {"alice": "owner", "bob": "owner"}

    set_disabled(any_workspace, "bob", False, actor="alice")
    add_member(any_workspace, "vision", "alice", "admin", actor="bob")
    with pytest.raises(LastOwnerError):
        set_disabled(any_workspace, "bob", True, actor="tester")
    # a disabled owner manages nothing already: removing one leaves the project no worse
    add_member(any_workspace, "vision", "alice", "owner", actor="bob")
    set_disabled(any_workspace, "bob", True, actor="alice")
    remove_member(any_workspace, "vision", "bob", actor="alice")
    assert _roles(any_workspace, "vision") == {"alice": "owner"}


def test_group_sync_never_drops_the_last_owner(any_workspace) -> None:
    for name in ("alice", "bob"):
        create_user(any_workspace, name, actor="tester")
    set_project_roles(any_workspace, "alice", {"vision": "owner", "nlp": "owner"}, actor="oidc")
    set_project_roles(any_workspace, "bob", {"nlp": "owner"}, actor="oidc")

    # the provider drops alice from vision's owners and demotes her in nlp
    held = set_project_roles(any_workspace, "alice", {"nlp": "viewer"}, actor="oidc")

    # vision has no other owner: alice stays; nlp has bob: the demotion goes through
    assert held == {"vision": "owner", "nlp": "viewer"}
    held = set_project_roles(any_workspace, "alice", {"vision": "developer"}, actor="oidc")
    assert held["vision"] == "owner"
    with any_workspace.store.session() as session:
        kept = session.scalars(
            select(AuditEvent.object_ref).where(AuditEvent.action == "project.member.keep")
        ).all()
    assert kept == ["project:vision", "project:vision"]
