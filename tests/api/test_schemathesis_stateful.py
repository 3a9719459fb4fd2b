"""Schemathesis's state machine over the OpenAPI links (`api/_openapi.py`): sequences of
created jobs, queues and tokens, each followed by what its links lead to, as an owner:
0 server errors and every answer on the schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from forgeml.api import create_app
from forgeml.api._accounts import AccountsAuthorizer
from forgeml.api._hosts import ServedHosts
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.api._accounts_app import Clock, seed
from tests.api.test_schemathesis import CHECKS
from tests.auth._accounts import fast_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """The app over a fresh workspace and an owner's token."""
    root: Path = tmp_path_factory.mktemp("stateful")
    workspace = Workspace(Settings(home=root / "home", user="tester"))
    auth = fast_settings(root)
    # schemathesis's ASGI transport names the host `testserver`
    served = ServedHosts(allowed_hosts=["testserver"])
    app = create_app(workspace, AccountsAuthorizer(workspace, auth, clock=Clock()), hosts=served)
    tokens = seed(workspace, auth, {"alice": ("owner", "default")})
    yield app, tokens["alice"]
    workspace.close()


def test_the_linked_operations_never_fail_the_server_nor_the_schema(linked) -> None:
    app, token = linked
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(
        path_regex="^/api/v1/(jobs|queues|tokens)"
    )
    steps: list[str] = []

    class LinkedMachine(schema.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": {"Authorization": f"Bearer {token}"}}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            steps.append(f"{case.operation.label} {response.status_code}")
            case.validate_response(response, checks=CHECKS)

    LinkedMachine.run(
        settings=settings(
            max_examples=30,
            stateful_step_count=6,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    # the links were walked: a created job was then shown, cancelled or retried
    followed = [
        step
        for step in steps
        if step.startswith(("GET /api/v1/jobs/{ref}", "POST /api/v1/jobs/{ref}"))
    ]
    assert followed, steps
