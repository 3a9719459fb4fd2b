"""Labelling routes: the flow as the caller `alice`, the CLI's JSON, 4xx JSON on bad input."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from forgeml.core.store import AuditEvent, Dataset
from forgeml.core.workspace import Workspace
from tests.api.conftest import api_client
from tests.label.conftest import add_reviews

TASK = {
    "name": "sentiment",
    "dataset": "reviews@v1",
    "schema": {"classes": ["pos", "neg"]},
    "instructions": "Positive or negative?",
    "overlap": 1,
}


def test_the_labelling_flow_as_the_caller(api_workspace: Workspace, tmp_path: Path) -> None:
    add_reviews(api_workspace, tmp_path)
    with api_client(api_workspace) as client:
        created = client.post("/api/v1/labels", json=TASK)
        assert created.status_code == 201, created.text
        assert created.json()["items"] == 6
        assert [t["name"] for t in client.get("/api/v1/labels").json()] == ["sentiment"]
        reordered = client.post(
            "/api/v1/labels/sentiment/reorder", json={"strategy": "random", "seed": 4}
        )
        assert reordered.status_code == 200, reordered.text
        served = client.post("/api/v1/labels/sentiment/next").json()
        stored = client.post(
            "/api/v1/labels/sentiment/submit", json={"item": served["item"], "label": "pos"}
        )
        assert stored.status_code == 200, stored.text
        assert stored.json()["annotator"] == "alice"
        imported = client.post(
            "/api/v1/labels/sentiment/import",
            json={"format": "csv", "content": "item,annotator,label\n5,bob,neg\n"},
        )
        assert imported.json() == {"task": "sentiment", "added": 1, "skipped": 0}
        settled = client.post(
            "/api/v1/labels/sentiment/adjudicate", json={"item": 5, "label": "pos"}
        )
        assert settled.json()["adjudicated"] is True
        shown = client.get("/api/v1/labels/sentiment").json()
        assert shown["progress"]["by_annotator"] == {"alice": 2, "bob": 1}
        exported = client.post("/api/v1/labels/sentiment/export", json={"resolve": "adjudicated"})
        assert exported.status_code == 201, exported.text
        assert exported.json()["annotators"] == ["alice"]
    with api_workspace.store.session() as session:
        actors = session.execute(
            select(AuditEvent.action, AuditEvent.actor).where(AuditEvent.action.like("label.%"))
        ).all()
    assert {actor for _, actor in actors} == {"alice"}
    assert [a for a, _ in actors] == [
        "label.task.create", "label.task.reorder", "label.submit", "label.import",
        "label.submit",
    ]  # fmt: skip


def test_bad_requests_answer_4xx_json(api_workspace: Workspace, tmp_path: Path) -> None:
    add_reviews(api_workspace, tmp_path)
    with api_client(api_workspace) as client:
        assert client.post("/api/v1/labels", json=TASK).status_code == 201
        cases = [
            (client.post("/api/v1/labels", json=TASK), 409, "already exists"),
            (client.get("/api/v1/labels/nope"), 404, "does not exist"),
            (
                client.post("/api/v1/labels/sentiment/submit", json={"item": 0, "label": "meh"}),
                422,
                "not one of the task's classes",
            ),
            (
                client.post(
                    "/api/v1/labels/sentiment/import",
                    json={"format": "jsonl", "content": "{oops"},
                ),
                422,
                "the content line 1 is not valid JSON",
            ),
            (client.get("/api/v1/labels/sentiment/agreement"), 422, "no agreement to measure"),
            (client.post("/api/v1/labels/sentiment/export", json={}), 422, "no settled label"),
            (
                client.post("/api/v1/labels", json={**TASK, "name": "t", "strategy": "entropy"}),
                422,
                "needs a model version",
            ),
        ]
        for answer, status, sentence in cases:
            assert answer.status_code == status, answer.text
            assert sentence in str(answer.json())


def test_an_export_records_its_dataset_in_the_tasks_project(
    api_workspace: Workspace, tmp_path: Path
) -> None:
    add_reviews(api_workspace.in_project("team-b"), tmp_path)
    team_b = {"X-Forgeml-Project": "team-b"}  # labelling tasks belong to the request's project
    with api_client(api_workspace) as client:
        assert client.post("/api/v1/labels", json=TASK, headers=team_b).status_code == 201
        served = client.post("/api/v1/labels/sentiment/next", headers=team_b).json()
        client.post(
            "/api/v1/labels/sentiment/submit",
            json={"item": served["item"], "label": "pos"},
            headers=team_b,
        )
        elsewhere = client.post("/api/v1/labels/sentiment/export", json={"resolve": "majority"})
        exported = client.post(
            "/api/v1/labels/sentiment/export", json={"resolve": "majority"}, headers=team_b
        )

    assert elsewhere.status_code == 403, elsewhere.text  # acting in default
    assert exported.status_code == 201, exported.text
    with api_workspace.store.session() as session:
        projects = dict(session.execute(select(Dataset.name, Dataset.project)).all())
    assert projects == {"reviews": "team-b", "reviews-labelled": "team-b"}
