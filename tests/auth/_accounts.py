"""Account helpers the auth and API tests share: cheap Argon2 settings, seeded accounts."""

from __future__ import annotations

from pathlib import Path

from forgeml.auth import AuthSettings, Passwords, add_member, create_project, create_user
from forgeml.core.workspace import Workspace

PASSWORD = "correct horse battery staple"


def fast_settings(tmp_path: Path, **overrides: object) -> AuthSettings:
    """Argon2id at its smallest cost (tests only; production keeps RFC 9106's 64 MiB)."""
    values: dict[str, object] = {
        "argon2_time_cost": 1,
        "argon2_memory_kib": 8,
        "argon2_parallelism": 1,
        "session_key_file": tmp_path / "keys" / "session.key",
    }
    values.update(overrides)
    return AuthSettings.model_validate(values)


def person(
    workspace: Workspace,
    settings: AuthSettings,
    name: str,
    role: str | None = None,
    project: str = "default",
) -> None:
    """A person with `PASSWORD`, holding `role` in `project` (created when missing)."""
    create_user(workspace, name, actor="tester", password=PASSWORD, passwords=Passwords(settings))
    if role is not None:
        if project != "default" and project not in _projects(workspace):
            create_project(workspace, project, actor="tester")
        add_member(workspace, project, name, role, actor="tester")


def _projects(workspace: Workspace) -> set[str]:
    from forgeml.auth import list_projects

    return {p["name"] for p in list_projects(workspace)}
