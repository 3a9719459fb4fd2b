"""A route acts in the project its permission was decided in, never in a header's project
for a kind that lives install-wide."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from forgeml.api._context import acting_project
from forgeml.api._projects import PERMISSION


def request_as(permission: str | None, path_params: dict[str, str] | None = None) -> Request:
    scope = {
        "type": "http", "method": "POST", "path": "/", "query_string": b"",
        "headers": [(b"x-forgeml-project", b"team-b")], "path_params": path_params or {},
    }  # fmt: skip
    request = Request(scope)
    if permission is not None:
        setattr(request.state, PERMISSION, permission)
    return request


@pytest.mark.parametrize(
    "permission",
    ["alerts:receive", "queues:manage", "audit:read"],
)  # fmt: skip
def test_an_install_wide_route_acts_in_default_whatever_the_header(permission: str) -> None:
    assert acting_project(request_as(permission)) == "default"


@pytest.mark.parametrize(
    "permission",
    ["datasets:write", "jobs:submit", "prompts:read", "rag:read", "labels:manage",
     "alerts:read", "alerts:ack", "agents:run", "agents:approve", "keys:manage", "cost:read",
     None],
)  # fmt: skip
def test_a_partitioned_route_or_none_recorded_acts_in_the_headers_project(
    permission: str | None,
) -> None:
    assert acting_project(request_as(permission)) == "team-b"


def test_reading_the_shared_queues_acts_in_the_headers_project() -> None:
    assert acting_project(request_as("queues:read")) == "team-b"


def test_an_install_wide_route_naming_its_project_acts_there() -> None:
    assert acting_project(request_as("queues:read", {"project": "team-c"})) == "team-c"
