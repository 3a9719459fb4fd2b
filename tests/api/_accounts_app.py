"""An app over a workspace with accounts, and tokens for the identities the tests use."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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


# a small dataset's rows, as a CSV upload's body
CSV = b"x,y\n1,a\n2,b\n3,a\n"


class Caller:
    """Requests as one token, in one project (None: no header, `default`)."""

    def __init__(self, client: TestClient, token: str, project: str | None) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}
        if project is not None:
            self.headers["X-Forgeml-Project"] = project

    def get(self, url: str) -> tuple[int, Any]:
        answer = self.client.get(url, headers=self.headers)
        return answer.status_code, answer.json()

    def post(self, url: str, body: object = None) -> tuple[int, Any]:
        answer = self.client.post(url, json=body, headers=self.headers)
        return answer.status_code, answer.json()

    def upload(self, name: str, body: bytes = CSV, filename: str = "data.csv") -> int:
        """A new version of dataset `name` from `body`; the answer's status."""
        answer = self.client.post(
            f"/api/v1/datasets/{name}/versions",
            params={"filename": filename},
            content=body,
            headers=self.headers,
        )
        return answer.status_code
