"""Gateway keys and cost reports belong to a project: a key is created, listed, revoked and
reported in its project; a cost report sums the request's project's jobs and keys; queue
budgets are the shared queues' (read as queues are, from every project)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.ids import new_id
from forgeml.core.store import DeploymentRecord
from forgeml.core.workspace import Workspace
from forgeml.gateway import create_key
from forgeml.gateway._usage import UsageRecorder
from tests.api._accounts_app import Caller, accounts_client, seed
from tests.scheduler.test_cost import add_attempt, add_job, add_queue


@pytest.fixture
def teams(workspace: Workspace, tmp_path: Path) -> Iterator[dict]:
    client, settings, _ = accounts_client(workspace, tmp_path)
    tokens = seed(
        workspace,
        settings,
        {
            "alice": ("owner", "default"),
            "ann": ("admin", "team-a"),
            "vic": ("viewer", "team-a"),
            "ben": ("admin", "team-b"),
        },
    )
    with client:
        yield {
            "workspace": workspace,
            "alice": Caller(client, tokens["alice"], None),
            "ann": Caller(client, tokens["ann"], "team-a"),
            "ann_no_header": Caller(client, tokens["ann"], None),
            "vic": Caller(client, tokens["vic"], "team-a"),
            "ben": Caller(client, tokens["ben"], "team-b"),
        }


def _get(caller: Caller, url: str) -> tuple[int, Any]:
    answer = caller.client.get(url, headers=caller.headers)
    return answer.status_code, answer.json()


def _post(caller: Caller, url: str, body: object = None) -> tuple[int, Any]:
    answer = caller.client.post(url, json=body, headers=caller.headers)
    return answer.status_code, answer.json()


def _deployment(workspace: Workspace, name: str, project: str) -> None:
    with workspace.store.session() as session:
        session.add(
            DeploymentRecord(
                id=new_id(), name=name, project=project, status="ready", spec={}, revision=1,
                created_by="tester",
            )
        )  # fmt: skip


def test_a_projects_admin_creates_lists_and_revokes_its_own_keys(teams: dict) -> None:
    status, created = _post(teams["ann"], "/api/v1/keys", {"name": "ci-a"})
    assert status == 201 and created["project"] == "team-a" and created["key"].startswith("fml_")
    prefix = created["prefix"]
    assert [key["name"] for key in _get(teams["ann"], "/api/v1/keys")[1]] == ["ci-a"]
    assert _get(teams["ben"], "/api/v1/keys") == (200, [])
    assert _get(teams["alice"], "/api/v1/keys") == (200, [])

    revoke = f"/api/v1/keys/{prefix}/revoke"
    # authorized in the key's project: team-b's admin and default's owner hold no role there
    status, refused = _post(teams["ben"], revoke)
    assert status == 403 and "'team-a'" in refused["error"]
    assert _post(teams["alice"], revoke)[0] == 403
    # team-a's admin, acting in default: the revoke must act in the key's project
    status, refused = _post(teams["ann_no_header"], revoke)
    assert status == 403 and "belongs to the project 'team-a'" in refused["error"]
    status, revoked = _post(teams["ann"], revoke)
    assert status == 200 and revoked["revoked_at"] is not None


def test_a_scope_naming_another_projects_deployment_is_refused_at_create(teams: dict) -> None:
    _deployment(teams["workspace"], "served-a", "team-a")
    _deployment(teams["workspace"], "served-b", "team-b")
    status, refused = _post(teams["ann"], "/api/v1/keys", {"name": "x", "scopes": ["served-b"]})
    assert status == 403 and "'served-b' belongs to the project 'team-b'" in refused["error"]
    status, created = _post(teams["ann"], "/api/v1/keys", {"name": "y", "scopes": ["served-a"]})
    assert status == 201 and created["scopes"] == ["served-a"]
    assert [key["name"] for key in _get(teams["ann"], "/api/v1/keys")[1]] == ["y"]


def test_key_usage_and_cost_by_key_show_the_projects_keys_only(teams: dict) -> None:
    workspace = teams["workspace"]
    key_a, _ = create_key(workspace.in_project("team-a"), "key-a")
    key_b, _ = create_key(workspace.in_project("team-b"), "key-b")
    recorder = UsageRecorder(workspace)
    for key, deployment in ((key_a, "served-a"), (key_b, "served-b")):
        recorder.record(key["id"], deployment, forwarded=True, error=False, latency_ms=1.0)
    assert recorder.flush() == 2

    status, usage = _get(teams["ann"], "/api/v1/keys/usage")
    assert status == 200 and [(row["name"], row["deployment"]) for row in usage] == [
        ("key-a", "served-a")
    ]
    status, report = _get(teams["vic"], "/api/v1/cost/report?by=key")
    assert status == 200 and [row["name"] for row in report["rows"]] == ["key-a"]
    assert [row["name"] for row in _get(teams["ben"], "/api/v1/cost/report?by=key")[1]["rows"]] == [
        "key-b"
    ]
    assert _get(teams["alice"], "/api/v1/cost/report?by=key")[1]["rows"] == []


def test_a_cost_report_sums_its_projects_jobs_and_budgets_stay_install_wide(
    teams: dict,
) -> None:
    workspace = teams["workspace"]
    add_attempt(workspace, add_job(workspace.in_project("team-a"), "job-a", model="m-a"), 2.0)
    add_attempt(workspace, add_job(workspace.in_project("team-b"), "job-b", model="m-b"), 3.0)
    add_queue(workspace, "default", budget=4.0)

    for who, job, model in (("vic", "job-a", "m-a"), ("ben", "job-b", "m-b")):
        status, by_job = _get(teams[who], "/api/v1/cost/report?by=job")
        assert status == 200 and [row["name"] for row in by_job["rows"]] == [job]
        by_model = _get(teams[who], "/api/v1/cost/report?by=model")[1]
        assert [row["key"] for row in by_model["rows"]] == [model]
    assert _get(teams["alice"], "/api/v1/cost/report")[1]["rows"] == []

    # a queue's budget counts every project's jobs: read as the shared queues are, from
    # every project
    for who in ("vic", "alice"):
        status, budgets = _get(teams[who], "/api/v1/cost/budgets")
        assert status == 200
        assert [(q["queue"], q["spend"], q["exceeded"]) for q in budgets["queues"]] == [
            ("default", 5.0, True)
        ]
