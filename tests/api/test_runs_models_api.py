"""Run and model routes over the trained Adult workspace: the same JSON as the CLI's
`--json`, paged lists, metric curves, and promotion through the metric gate."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from tests.api.conftest import api_client
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.train.conftest import TRAINED_RUNS, copy_home, trained_adult_template


@pytest.fixture
def home(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return copy_home(trained_adult_template(tmp_path_factory), tmp_path / "home")


@pytest.fixture
def api(home: Path) -> Iterator[TestClient]:
    workspace = Workspace(Settings(home=home, user="tester"))
    with api_client(workspace) as client:
        yield client
    workspace.close()


def test_runs_and_models_answer_what_the_cli_prints(
    api: TestClient, cli: Callable[..., CliResult]
) -> None:
    run_id = api.get("/api/v1/models/adult-mlp@v1").json()["run_id"]
    pairs = [
        (("runs", "list"), "/api/v1/runs"),
        (("runs", "show", run_id[:8]), f"/api/v1/runs/{run_id[:8]}"),
        (("runs", "show", "adult-small"), "/api/v1/runs/adult-small"),
        (("models", "list"), "/api/v1/models"),
        (("models", "show", "adult-mlp@v2"), "/api/v1/models/adult-mlp@v2"),
        (("data", "list"), "/api/v1/datasets"),
        (("data", "show", "adult@v4"), "/api/v1/datasets/adult@v4"),
        (("queues", "list"), "/api/v1/queues"),
        (("keys", "list"), "/api/v1/keys"),
    ]
    for command, url in pairs:
        answer = api.get(url)
        assert answer.status_code == 200, (url, answer.text)
        assert answer.json() == json_out(cli(*command, "--json")), command
    events = api.get("/api/v1/audit", params={"order": "desc", "limit": 50}).json()
    assert events[::-1] == json_out(cli("audit", "log", "--json"))


def test_runs_page_filter_and_sort_on_the_server(api: TestClient) -> None:
    names = [name for name, _, _ in TRAINED_RUNS]
    first = api.get("/api/v1/runs", params={"limit": 3})
    rest = api.get("/api/v1/runs", params={"limit": 3, "after": first.headers["X-Next-Cursor"]})
    assert "X-Next-Cursor" not in rest.headers
    assert [r["name"] for r in first.json() + rest.json()] == names[::-1]
    failed = api.get("/api/v1/runs", params={"status": "FAILED"}).json()
    assert [r["error"] is not None for r in failed] == [True]
    small = api.get("/api/v1/runs", params={"name": "adult-small", "sort": "name"}).json()
    assert [r["name"] for r in small] == ["adult-small"]
    assert api.get("/api/v1/runs", params={"status": "DONE"}).status_code == 422


def test_a_runs_metric_curves_come_from_its_tracking(api: TestClient) -> None:
    run_id = api.get("/api/v1/models/adult-mlp@v1").json()["run_id"]
    curves = api.get(f"/api/v1/runs/{run_id}/metrics", params={"key": "train_loss"}).json()
    assert curves["run_id"] == run_id
    steps = [step for step, _ in curves["metrics"]["train_loss"]]
    assert steps == sorted(steps) and len(steps) > 1
    every = api.get(f"/api/v1/runs/{run_id}/metrics").json()["metrics"]
    assert "train_loss" in every and "accuracy" in every
    assert api.get("/api/v1/runs/nosuch/metrics").status_code == 404


def test_models_page_by_name_then_version(api: TestClient) -> None:
    first = api.get("/api/v1/models", params={"limit": 2})
    rest = api.get("/api/v1/models", params={"after": first.headers["X-Next-Cursor"]}).json()
    assert [m["ref"] for m in first.json() + rest] == ["adult-mlp@v1", "adult-mlp@v2",
                                                       "adult-small@v1"]  # fmt: skip
    newest = api.get("/api/v1/models", params={"sort": "created_at", "order": "desc"}).json()
    assert newest[0]["ref"] == "adult-small@v1"
    assert [m["ref"] for m in api.get("/api/v1/models", params={"name": "adult-small"}).json()] == [
        "adult-small@v1"
    ]


def test_promotion_is_gated_audited_as_the_caller_and_shown(api: TestClient, home: Path) -> None:
    url = "/api/v1/models/adult-mlp/promote"
    first = api.post(url, json={"version": 1, "alias": "staging"})
    assert first.status_code == 200, first.text
    assert (first.json()["changed"], first.json()["previous"]) == (True, None)
    assert api.get("/api/v1/models/adult-mlp@staging").json()["version"] == 1
    refused = api.post(url, json={"version": 1, "metric": "bleu"})
    assert refused.status_code == 409
    assert refused.json()["error"].startswith("Model adult-mlp@v1 has no metric 'bleu'")
    forced = api.post(url, json={"version": 1, "metric": "bleu", "force": True}).json()
    assert (forced["forced"], forced["value"]) == (True, None)
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        with workspace.store.session() as session:
            promotions = session.scalars(
                select(AuditEvent).where(AuditEvent.action.startswith("model.promote"))
            ).all()
    finally:
        workspace.close()
    assert [(e.actor, e.action) for e in promotions] == [
        ("alice", "model.promote"), ("alice", "model.promote.forced"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"version": 9}, 404, "Model 'adult-mlp' has no version v9"),
        ({"version": 1, "alias": "latest"}, 400, "Invalid alias"),
        ({"version": 1, "mode": "best"}, 422, "body.mode:"),
        ({"version": 1, "aliases": "x"}, 422, "body.aliases: Extra inputs"),
        ({"version": "one"}, 422, "body.version:"),
    ],
)
def test_a_bad_promotion_is_a_json_error_and_moves_nothing(
    api: TestClient, body: dict, status: int, error: str
) -> None:
    answer = api.post("/api/v1/models/adult-mlp/promote", json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"].startswith(error), answer.json()
    assert [m["aliases"] for m in api.get("/api/v1/models").json()] == [[], [], []]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_traffic_moves_the_canary_weight_as_a_new_revision_keeping_the_replicas(
    api: TestClient, home: Path
) -> None:
    from forgeml.serve.deployments import deploy
    from tests.serve.test_deployments import kill_servers, server_pids

    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        made = deploy(workspace, "api-adult", "adult-mlp@v1", canary="adult-small@v1",
                      canary_weight=10)  # fmt: skip
        pids = sorted(server_pids("api-adult"))
        moved = api.post("/api/v1/deployments/api-adult/traffic", json={"canary_weight": 50})
        assert moved.status_code == 200, moved.text
        assert (moved.json()["revision"], moved.json()["spec"]["canary"]["weight"]) == (
            made.revision + 1, 50,
        )  # fmt: skip
        assert sorted(server_pids("api-adult")) == pids  # the replicas kept running
        assert api.get("/api/v1/deployments/api-adult").json() == moved.json()
        same = api.post("/api/v1/deployments/api-adult/traffic", json={"canary_weight": 50})
        assert same.status_code == 409 and "already runs this spec" in same.json()["error"]
        over = api.post("/api/v1/deployments/api-adult/traffic", json={"canary_weight": 150})
        assert over.status_code == 422 and over.json()["error"].startswith("body.canary_weight")
        deleted = api.delete("/api/v1/deployments/api-adult")
        assert (deleted.status_code, deleted.json()["status"]) == (200, "deleted"), deleted.text
        assert server_pids("api-adult") == []  # delete stops them before it answers
        assert api.delete("/api/v1/deployments/api-adult").status_code == 404
        gone = api.post("/api/v1/deployments/api-adult/traffic", json={"canary_weight": 5})
        assert gone.status_code == 422 and "has no canary" in gone.json()["error"]
        assert api.post("/api/v1/deployments/nope/traffic",
                        json={"canary_weight": 5}).status_code == 404  # fmt: skip
    finally:
        kill_servers("api-adult")
        workspace.close()
