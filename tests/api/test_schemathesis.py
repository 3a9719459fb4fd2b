"""The whole OpenAPI document of a seeded app, fuzzed by schemathesis as an owner and as a
viewer: 0 server errors and 0 responses off the schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from forgeml.api import create_app
from forgeml.api._accounts import AccountsAuthorizer
from forgeml.api._hosts import ServedHosts
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.prompts import create_prompt
from tests.api._accounts_app import Clock, seed
from tests.auth._accounts import fast_settings
from tests.prompts.conftest import chat_spec, text_spec
from tests.train.conftest import copy_home, trained_adult_template

EXAMPLES = 3
# `POST /api/v1/commands/archive` takes a tar: bytes, sent as schemathesis sends any binary body
schemathesis.serializer.alias("application/x-tar", "application/octet-stream")
# the two properties: never a server error, and every answer on the schema (its
# status declared, its body of the declared shape); not schemathesis' other defaults, such
# as "a schema-valid request is accepted" (path names are checked in the domain, not in
# the document)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, dict[str, str]]]:
    root = tmp_path_factory.mktemp("schemathesis")
    home = copy_home(trained_adult_template(tmp_path_factory), root / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    auth = fast_settings(root)
    # schemathesis's ASGI transport and TestClient name the host `testserver`
    served = ServedHosts(allowed_hosts=["testserver"])
    app = create_app(workspace, AccountsAuthorizer(workspace, auth, clock=Clock()), hosts=served)
    tokens = seed(workspace, auth, {"alice": ("owner", "default"), "carol": ("viewer", "default")})
    create_prompt(workspace, "qa", text_spec())
    create_prompt(workspace, "chat", chat_spec())
    with TestClient(app) as client:
        owner = {"Authorization": f"Bearer {tokens['alice']}"}
        job = client.post("/api/v1/jobs", json={"command": ["true"]}, headers=owner)
        assert job.status_code < 300, job.text
        yield app, {"owner": tokens["alice"], "viewer": tokens["carol"]}
    workspace.close()


def _fuzz(operation, mode: GenerationMode, headers: list[dict[str, str]]) -> list[str]:
    failures: list[str] = []

    @given(operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    def run(case) -> None:
        for header in headers:
            try:
                case.call_and_validate(headers=header, checks=CHECKS)
            except (AssertionError, FailureGroup) as error:  # what the checks raise
                failures.append(f"{operation.label} {mode.value}: {str(error)[:400]}")

    try:
        run()
    except Unsatisfiable:
        # an operation whose every input takes anything (or that has none) has no invalid
        # request to make; the positive mode still covers it
        assert mode is GenerationMode.NEGATIVE, operation.label
    return failures


@pytest.mark.slow
def test_every_operation_as_owner_and_viewer_answers_on_schema_and_never_5xx(seeded) -> None:
    app, tokens = seeded
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    headers = [{"Authorization": f"Bearer {tokens[role]}"} for role in ("viewer", "owner")]
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failures += _fuzz(operation, mode, headers)
    assert failures == []
