"""Every route x identity against an expected table: 0 unexpected allows, 0 unexpected
denials. The table is written out by hand (not derived from the role table), so a change
to a role, a route's permission or the decision shows up here."""

from __future__ import annotations

import re

import pytest

from forgeml.api._authz import PUBLIC, api_routes, route_permission
from forgeml.auth import issue_token, revoke_token
from tests.api._accounts_app import accounts_client, seed

IDENTITIES = ("owner", "other_project", "viewer", "anonymous", "revoked", "wrong_scope")
EVERYONE = {"owner", "other_project", "viewer"}
# (method, path): the identities allowed; anonymous and a revoked token get 401, the rest 403
EXPECTED: dict[tuple[str, str], set[str]] = {
    ("GET", "/api/v1/alerts"): {"owner", "viewer"},
    ("GET", "/api/v1/alerts/{alert_id}"): {"owner", "viewer"},
    ("POST", "/api/v1/alerts/{alert_id}/ack"): {"owner"},
    ("POST", "/api/v1/alertmanager"): {"owner"},
    ("POST", "/api/v1/agents/runs"): {"owner"},
    ("GET", "/api/v1/agents/runs/{run_id}"): {"owner", "viewer"},
    ("POST", "/api/v1/agents/runs/{run_id}/approve"): {"owner"},
    ("GET", "/api/v1/auth/me"): EVERYONE,
    ("PATCH", "/api/v1/auth/me"): EVERYONE,
    ("GET", "/api/v1/tokens"): EVERYONE,
    ("POST", "/api/v1/tokens"): EVERYONE,
    ("DELETE", "/api/v1/tokens/{token_id}"): EVERYONE,
    ("GET", "/api/v1/tokens/all"): {"owner"},
    ("POST", "/api/v1/tokens/{token}/revoke"): {"owner"},
    ("GET", "/api/v1/users"): {"owner"},
    ("POST", "/api/v1/users"): {"owner"},
    ("GET", "/api/v1/users/{name}"): {"owner"},
    ("PATCH", "/api/v1/users/{name}"): {"owner"},
    ("GET", "/api/v1/users/{name}/tokens"): {"owner"},
    ("POST", "/api/v1/users/{name}/tokens"): {"owner"},
    ("DELETE", "/api/v1/users/{name}/tokens/{token_id}"): {"owner"},
    ("GET", "/api/v1/projects"): {"owner", "viewer"},
    ("POST", "/api/v1/projects"): {"owner"},
    ("GET", "/api/v1/projects/{project}/members"): {"owner", "viewer"},
    ("PUT", "/api/v1/projects/{project}/members/{name}"): {"owner"},
    ("DELETE", "/api/v1/projects/{project}/members/{name}"): {"owner"},
    # the resources the CLI manages; the wrong-scope token holds datasets:read only
    ("GET", "/api/v1/datasets"): {"owner", "viewer", "wrong_scope"},
    ("GET", "/api/v1/datasets/{name}/versions"): {"owner", "viewer", "wrong_scope"},
    ("GET", "/api/v1/datasets/{ref}"): {"owner", "viewer", "wrong_scope"},
    ("POST", "/api/v1/datasets/{name}/versions"): {"owner"},
    ("GET", "/api/v1/datasets/{ref}/frame"): {"owner", "viewer", "wrong_scope"},
    ("GET", "/api/v1/datasets/{ref}/diff"): {"owner", "viewer", "wrong_scope"},
    ("POST", "/api/v1/datasets/query"): {"owner", "viewer", "wrong_scope"},
    ("POST", "/api/v1/datasets/{ref}/rebuild"): {"owner", "viewer", "wrong_scope"},
    ("POST", "/api/v1/datasets/{ref}/derive"): {"owner"},
    ("POST", "/api/v1/jobs"): {"owner"},
    ("GET", "/api/v1/jobs"): {"owner", "viewer"},
    ("GET", "/api/v1/jobs/{ref}"): {"owner", "viewer"},
    ("POST", "/api/v1/jobs/{ref}/cancel"): {"owner"},
    ("POST", "/api/v1/jobs/{ref}/retry"): {"owner"},
    ("GET", "/api/v1/jobs/{ref}/logs"): {"owner", "viewer"},
    ("GET", "/api/v1/jobs/{ref}/log"): {"owner", "viewer"},
    ("GET", "/api/v1/jobs/{ref}/export"): {"owner", "viewer"},
    ("GET", "/api/v1/queues"): {"owner", "viewer"},
    ("GET", "/api/v1/queues/{name}"): {"owner", "viewer"},
    ("POST", "/api/v1/queues"): {"owner"},
    ("GET", "/api/v1/runs"): {"owner", "viewer"},
    ("GET", "/api/v1/runs/{ref}"): {"owner", "viewer"},
    ("GET", "/api/v1/runs/{ref}/metrics"): {"owner", "viewer"},
    ("GET", "/api/v1/runs/{ref}/fairness"): {"owner", "viewer"},
    ("POST", "/api/v1/runs/{ref}/reproduce"): {"owner"},
    ("GET", "/api/v1/models"): {"owner", "viewer"},
    ("GET", "/api/v1/models/{ref}"): {"owner", "viewer"},
    ("POST", "/api/v1/models/{name}/promote"): {"owner"},
    ("POST", "/api/v1/models/import"): {"owner"},
    ("POST", "/api/v1/models/{ref}/mitigate"): {"owner"},
    ("GET", "/api/v1/models/{name}/versions/{version}/card"): {"owner", "viewer"},
    ("PUT", "/api/v1/models/{name}/versions/{version}/card"): {"owner"},
    ("GET", "/api/v1/models/{name}/versions/{version}/export"): {"owner", "viewer"},
    ("POST", "/api/v1/models/{name}/versions/{version}/explain"): {"owner", "viewer"},
    ("GET", "/api/v1/deployments"): {"owner", "viewer"},
    ("GET", "/api/v1/deployments/{name}"): {"owner", "viewer"},
    ("POST", "/api/v1/deployments/{name}/traffic"): {"owner"},
    ("DELETE", "/api/v1/deployments/{name}"): {"owner"},
    ("GET", "/api/v1/monitor/drift"): {"owner", "viewer"},
    ("GET", "/api/v1/monitor/accuracy"): {"owner", "viewer"},
    ("GET", "/api/v1/monitor/accuracy/windows"): {"owner", "viewer"},
    ("GET", "/api/v1/keys"): {"owner"},
    ("GET", "/api/v1/keys/usage"): {"owner"},
    ("POST", "/api/v1/keys"): {"owner"},
    ("POST", "/api/v1/keys/{key}/revoke"): {"owner"},
    ("GET", "/api/v1/prompts"): {"owner", "viewer"},
    ("GET", "/api/v1/prompts/{name}/versions"): {"owner", "viewer"},
    ("GET", "/api/v1/prompts/{ref}"): {"owner", "viewer"},
    ("POST", "/api/v1/prompts/{ref}/alias"): {"owner"},
    ("POST", "/api/v1/prompts/{name}/versions"): {"owner"},
    ("PUT", "/api/v1/prompts/{name}/split"): {"owner"},
    ("DELETE", "/api/v1/prompts/{name}/split"): {"owner"},
    ("POST", "/api/v1/prompts/{ref}/render"): {"owner", "viewer"},
    ("GET", "/api/v1/rag/indexes"): {"owner", "viewer"},
    ("GET", "/api/v1/rag/indexes/{name}/versions"): {"owner", "viewer"},
    ("GET", "/api/v1/rag/indexes/{ref}"): {"owner", "viewer"},
    ("POST", "/api/v1/rag/indexes/{ref}/query"): {"owner", "viewer"},
    ("GET", "/api/v1/pipelines/runs"): {"owner", "viewer"},
    ("GET", "/api/v1/pipelines/runs/{ref}"): {"owner", "viewer"},
    ("GET", "/api/v1/cost/report"): {"owner", "viewer"},
    ("GET", "/api/v1/cost/budgets"): {"owner", "viewer"},
    ("GET", "/api/v1/audit"): {"owner"},
    ("GET", "/api/v1/audit/verify"): {"owner"},
    ("GET", "/api/v1/labels"): {"owner", "viewer"},
    ("POST", "/api/v1/labels"): {"owner"},
    ("GET", "/api/v1/labels/{name}"): {"owner", "viewer"},
    ("POST", "/api/v1/labels/{name}/reorder"): {"owner"},
    ("POST", "/api/v1/labels/{name}/next"): {"owner"},
    ("POST", "/api/v1/labels/{name}/submit"): {"owner"},
    ("POST", "/api/v1/labels/{name}/adjudicate"): {"owner"},
    ("POST", "/api/v1/labels/{name}/import"): {"owner"},
    ("GET", "/api/v1/labels/{name}/agreement"): {"owner", "viewer"},
    ("POST", "/api/v1/labels/{name}/export"): {"owner"},
    # the read of the ref's kind; `x` names nothing and is asked datasets:read
    ("GET", "/api/v1/lineage/{record}"): {"owner", "viewer", "wrong_scope"},
    ("POST", "/api/v1/commands"): {"owner"},
    ("POST", "/api/v1/commands/archive"): {"owner"},
}
# acting in the other project: only its member may; a resource route does not declare
# `?project=`, so naming one there still acts in `default` (a request picks its project with
# the X-Forgeml-Project header: tests/api/test_projects_partition.py)
IN_OTHER_PROJECT: dict[tuple[str, str], set[str]] = {
    ("GET", "/api/v1/projects/vision/members"): {"other_project"},
    ("PUT", "/api/v1/projects/vision/members/x"): {"other_project"},
    ("GET", "/api/v1/auth/me?project=vision"): EVERYONE,
    ("POST", "/api/v1/users?project=vision"): {"other_project"},
    ("GET", "/api/v1/alerts?project=vision"): {"owner", "viewer"},
    ("POST", "/api/v1/alerts/x/ack?project=vision"): {"owner"},
    ("GET", "/api/v1/runs?project=vision"): {"owner", "viewer"},
    ("GET", "/api/v1/users?project=vision"): {"owner"},
}
# acting in the other project by its X-Forgeml-Project header: the shared queues are read
# in the request's project (its member may), created in default's only
BY_HEADER: dict[tuple[str, str], set[str]] = {
    ("GET", "/api/v1/queues"): {"other_project"},
    ("GET", "/api/v1/queues/x"): {"other_project"},
    ("POST", "/api/v1/queues"): {"owner"},
}


def _outcome(status: int) -> str:
    return {401: "401", 403: "403"}.get(status, "allowed")


def _expected(allowed: set[str], identity: str) -> str:
    if identity in allowed:
        return "allowed"
    return "401" if identity in {"anonymous", "revoked"} else "403"


@pytest.fixture
def matrix(any_workspace, tmp_path):
    workspace = any_workspace
    client, settings, _ = accounts_client(workspace, tmp_path)
    tokens = seed(
        workspace,
        settings,
        {
            "alice": ("owner", "default"),
            "bob": ("owner", "vision"),
            "carol": ("viewer", "default"),
            "dave": ("owner", "default"),
        },
    )
    revoked = tokens["dave"]
    revoke_token(workspace, revoked.split("_")[1], actor="tester")
    scoped = issue_token(workspace, "alice", "ci", actor="alice", scopes=["datasets:read"])[1]
    headers = {
        "owner": tokens["alice"],
        "other_project": tokens["bob"],
        "viewer": tokens["carol"],
        "revoked": revoked,
        "wrong_scope": scoped,
    }
    with client:
        yield (
            client,
            {
                who: ({"Authorization": f"Bearer {token}"} if token else {})
                for who, token in {**headers, "anonymous": None}.items()
            },
        )


def _ask(client, method: str, url: str, headers: dict[str, str]) -> int:
    # a body no route accepts: an allowed call stops at validation (422), changing nothing
    body = {"matrix_probe": 1} if method in {"POST", "PUT", "PATCH"} else None
    return client.request(method, url, json=body, headers=headers).status_code


def test_the_expected_table_covers_every_declared_route(workspace, tmp_path) -> None:
    client, _, _ = accounts_client(workspace, tmp_path)
    declared = {
        (method, route.path)
        for route in api_routes(client.app.routes)
        for method in route.methods
        if route_permission(route) != PUBLIC
    }
    assert declared == set(EXPECTED)


def test_role_matrix_has_no_unexpected_allow_or_denial(matrix) -> None:
    client, headers = matrix
    table = {**EXPECTED}
    cases = [(m, re.sub(r"\{project\}", "default", p), a, {}) for (m, p), a in table.items()]
    cases += [(m, p, a, {}) for (m, p), a in IN_OTHER_PROJECT.items()]
    cases += [(m, p, a, {"X-Forgeml-Project": "vision"}) for (m, p), a in BY_HEADER.items()]
    unexpected = []
    for method, path, allowed, project in cases:
        url = re.sub(r"\{[^}]+\}", "x", path)
        for identity in IDENTITIES:
            got = _outcome(_ask(client, method, url, headers[identity] | project))
            if got != _expected(allowed, identity):
                unexpected.append((method, url, project, identity, got))
    assert len(cases) * len(IDENTITIES) == 6 * (
        len(EXPECTED) + len(IN_OTHER_PROJECT) + len(BY_HEADER)
    )
    assert unexpected == []
