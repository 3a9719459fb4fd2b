"""The local side of the accounts' seams: users (`forgeml.sdk.users`, `forgeml users`),
projects (`forgeml.sdk.projects`, `forgeml projects`) and API tokens (`forgeml.sdk.tokens`,
`forgeml tokens`). Locally the workspace's actor (`FORGEML_USER`) acts, unchecked: the
server checks the caller's roles."""

from __future__ import annotations

from contextlib import closing
from datetime import timedelta
from typing import Any

from forgeml.core.workspace import open_workspace

Items = list[dict[str, Any]]  # named: the `list` methods below would shadow the type


class LocalUsers:
    """The local workspace's accounts, as `forgeml.client.Users` answers them remotely."""

    def create(
        self,
        name: str,
        *,
        kind: str = "user",
        email: str | None = None,
        password: str | None = None,
        role: str | None = None,
        project: str = "default",
    ) -> dict[str, Any]:
        from forgeml.auth import Passwords, add_member, create_user, get_auth_settings
        from forgeml.auth.roles import check_role

        if role is not None:
            check_role(role)  # before the account is made, as the API checks it
        with closing(open_workspace()) as workspace:
            passwords = Passwords(get_auth_settings()) if password is not None else None
            summary = create_user(
                workspace, name, actor=workspace.actor, kind=kind, email=email,
                password=password, passwords=passwords,
            )  # fmt: skip
            if role is not None:
                add_member(workspace, project, name, role, actor=workspace.actor)
            return summary | {"roles": {project: role} if role else {}}

    def list(self) -> Items:
        from forgeml.auth import list_users

        with closing(open_workspace()) as workspace:
            return list_users(workspace)

    def show(self, name: str) -> dict[str, Any]:
        from forgeml.auth import get_user, roles_of

        with closing(open_workspace()) as workspace:
            return get_user(workspace, name) | {"roles": roles_of(workspace, name)}

    def update(
        self,
        name: str,
        *,
        disabled: bool | None = None,
        email: str | None = None,
        password: str | None = None,
    ) -> dict[str, Any]:
        """Set what is given, in the API's order (`PATCH /api/v1/users/{name}`)."""
        from forgeml.auth import (
            Passwords,
            get_auth_settings,
            get_user,
            set_disabled,
            set_email,
            set_password,
        )

        with closing(open_workspace()) as workspace:
            actor = workspace.actor
            if password is not None:
                set_password(workspace, name, password, Passwords(get_auth_settings()), actor=actor)
            if email is not None:
                set_email(workspace, name, email, actor=actor)
            if disabled is not None:
                set_disabled(workspace, name, disabled, actor=actor)
            return get_user(workspace, name)


class LocalProjects:
    """The local workspace's projects, as `forgeml.client.Projects` answers them remotely."""

    def create(self, name: str, owner: str | None = None) -> dict[str, Any]:
        from forgeml.auth import create_project

        with closing(open_workspace()) as workspace:
            return create_project(workspace, name, actor=workspace.actor, owner=owner)

    def list(self) -> Items:
        from forgeml.auth import list_projects

        with closing(open_workspace()) as workspace:
            return list_projects(workspace)

    def members(self, project: str) -> Items:
        from forgeml.auth import list_members

        with closing(open_workspace()) as workspace:
            return list_members(workspace, project)

    def add_member(self, project: str, user: str, role: str) -> dict[str, Any]:
        from forgeml.auth import add_member

        with closing(open_workspace()) as workspace:
            return add_member(workspace, project, user, role, actor=workspace.actor)

    def remove_member(self, project: str, user: str) -> dict[str, Any]:
        from forgeml.auth import remove_member

        with closing(open_workspace()) as workspace:
            return remove_member(workspace, project, user, actor=workspace.actor)


class LocalTokens:
    """The local workspace's tokens, as `forgeml.client.Tokens` answers them remotely."""

    def create(
        self,
        user: str,
        name: str,
        scopes: list[str] | None = None,
        expires_days: float | None = None,
    ) -> dict[str, Any]:
        from forgeml.auth import issue_token

        with closing(open_workspace()) as workspace:
            expires = timedelta(days=expires_days) if expires_days is not None else None
            summary, token = issue_token(
                workspace, user, name, actor=workspace.actor, scopes=scopes, expires_in=expires
            )
            return summary | {"token": token}

    def list(self, user: str | None = None) -> Items:
        from forgeml.auth import list_tokens

        with closing(open_workspace()) as workspace:
            return list_tokens(workspace, user)

    def revoke(self, token: str) -> dict[str, Any]:
        from forgeml.auth import revoke_token

        with closing(open_workspace()) as workspace:
            return revoke_token(workspace, token, actor=workspace.actor)
