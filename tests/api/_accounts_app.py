"""An app over a workspace with accounts, and tokens for the identities the tests use."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from fastapi.testclient import TestClient

from forgeml.api import create_app
from forgeml.api._accounts import AccountsAuthorizer
from forgeml.auth import AuthSettings, issue_token
from forgeml.core.workspace import Workspace
from tests.auth._accounts import fast_settings, person


@dataclass
class Clock:
    now: datetime = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Accounts:
    workspace: Workspace
    settings: AuthSettings
    client: TestClient
    clock: Clock
    tokens: dict[str, str] = field(default_factory=dict)

    def bearer(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


def accounts_client(
    workspace: Workspace, tmp_path: Path, **settings: object
) -> tuple[TestClient, AuthSettings, Clock]:
    auth_settings = fast_settings(tmp_path, **settings)
    clock = Clock()
    app = create_app(workspace, AccountsAuthorizer(workspace, auth_settings, clock=clock))
    return TestClient(app, base_url="http://localhost"), auth_settings, clock


def seed(
    workspace: Workspace, settings: AuthSettings, people: dict[str, tuple[str, str]]
) -> dict[str, str]:
    """`people`: name -> (role, project); returns an unscoped token for each."""
    tokens = {}
    for name, (role, project) in people.items():
        person(workspace, settings, name, role, project)
        tokens[name] = issue_token(workspace, name, "test", actor="tester")[1]
    return tokens
