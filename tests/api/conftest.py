"""Fixtures of the API tests: an app over a fresh workspace, as a caller named `alice`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from forgeml.api import create_app
from forgeml.api._authz import Principal
from forgeml.api._limits import ApiLimits
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace


class Alice:
    """An authorizer that allows everything to `alice` and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def authorize(self, request: Request, permission: str) -> Principal:
        self.asked.append(permission)
        return Principal("alice")

    def allows(self, request: Request, permission: str, project: str) -> bool:
        return True


@contextmanager
def copied_workspace(template: Path, home: Path) -> Iterator[Workspace]:
    """A workspace over a private copy of the prepared FORGEML_HOME `template` at `home`,
    whose own user is `tester` (a test may change it; the template stays as built)."""
    from tests.train.conftest import copy_home

    workspace = Workspace(Settings(home=copy_home(template, home), user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()


def api_client(workspace: Workspace, limits: ApiLimits | None = None) -> TestClient:
    return TestClient(create_app(workspace, Alice(), limits=limits), base_url="http://localhost")


@pytest.fixture
def api_workspace(tmp_path: Path) -> Iterator[Workspace]:
    """A workspace on the embedded default whose own user is `tester` (callers are `alice`)."""
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()
