"""Labelling tasks belong to the project they were created in: a create lands in the
request's project (over that project's dataset, ranked by its model), a list shows that
project's only, an item route is authorized in its task's project, and what serves, labels,
imports into, reorders or exports a task acts in its project. Names stay unique (409)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from forgeml.auth import add_member
from forgeml.core.store import Dataset, LabelLeaseRecord
from forgeml.core.workspace import Workspace
from forgeml.data import pipeline
from forgeml.data.ingest import IngestOptions
from tests.api._accounts_app import Caller, accounts_client, seed
from tests.label.conftest import REVIEWS

SCHEMA = {"classes": ["pos", "neg"]}


def _reviews_in(workspace: Workspace, project: str, name: str, folder: Path) -> None:
    """The reviews as dataset `name`, added in `project`."""
    source = folder / f"{name}.csv"
    rows = [f'{key},"{text}"' for key, text in REVIEWS]
    source.write_text("\n".join(["id,text", *rows]) + "\n")
    pipeline.add(workspace.in_project(project), name, source, IngestOptions())


@pytest.fixture
def teams(any_workspace: Workspace, tmp_path: Path) -> Iterator[dict]:
    workspace = any_workspace
    client, settings, _ = accounts_client(workspace, tmp_path)
    tokens = seed(
        workspace,
        settings,
        {
            "alice": ("owner", "default"),
            "mia": ("maintainer", "team-a"),
            "max": ("maintainer", "team-b"),
            "pat": ("maintainer", "team-a"),
        },
    )
    add_member(workspace, "team-b", "pat", "maintainer", actor="tester")
    _reviews_in(workspace, "team-a", "reviews-a", tmp_path)
    _reviews_in(workspace, "team-b", "reviews-b", tmp_path)
    with client:
        yield {
            "workspace": workspace,
            "alice": Caller(client, tokens["alice"], None),
            "mia": Caller(client, tokens["mia"], "team-a"),
            "mia_no_header": Caller(client, tokens["mia"], None),
            "max": Caller(client, tokens["max"], "team-b"),
            "pat_in_b": Caller(client, tokens["pat"], "team-b"),
        }


def _task(name: str, dataset: str, **fields: object) -> dict[str, object]:
    return {"name": name, "dataset": dataset, "schema": SCHEMA, **fields}


def _names(items: object) -> list[str]:
    assert isinstance(items, list)
    return [item["name"] for item in items]


def test_a_teams_label_task_is_created_listed_and_read_in_its_project_only(teams: dict) -> None:
    mia = teams["mia"]

    # a maintainer of team-a alone creates its task (decided in team-a, not `default`)
    status, created = mia.post("/api/v1/labels", _task("sent-a", "reviews-a@v1"))
    assert status == 201, created
    assert created["project"] == "team-a"  # type: ignore[index]
    assert _names(mia.get("/api/v1/labels")[1]) == ["sent-a"]
    assert teams["max"].get("/api/v1/labels") == (200, [])
    assert teams["alice"].get("/api/v1/labels") == (200, [])
    for url in ("/api/v1/labels/sent-a", "/api/v1/labels/sent-a/agreement"):
        status, body = teams["max"].get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        assert teams["alice"].get(url)[0] == 403, url
        # team-a's member reads it without naming its project (agreement: none yet, 422)
        assert teams["mia_no_header"].get(url)[0] in (200, 422), url
    assert teams["mia_no_header"].get("/api/v1/labels/sent-a")[1]["project"] == "team-a"  # type: ignore[index]
    # an unknown task: authorized in the request's project, then 404
    assert teams["max"].get("/api/v1/labels/nosuch")[0] == 404


def test_another_projects_member_changes_nothing_of_a_teams_task(teams: dict) -> None:
    mia, workspace = teams["mia"], teams["workspace"]
    assert mia.post("/api/v1/labels", _task("sent-a", "reviews-a@v1"))[0] == 201
    changes = {
        "next": None,
        "submit": {"item": 0, "label": "pos"},
        "adjudicate": {"item": 0, "label": "pos"},
        "import": {"format": "csv", "content": "item,annotator,label\n1,bob,neg\n"},
        "reorder": {"strategy": "random", "seed": 2},
        "export": {"resolve": "majority"},
    }

    for route, body in changes.items():
        url = f"/api/v1/labels/sent-a/{route}"
        status, answer = teams["max"].post(url, body)
        assert status == 403 and "'team-a'" in answer["error"], (url, answer)  # type: ignore[index]
        assert teams["alice"].post(url, body)[0] == 403, url
        # a member of both, acting in team-b: authorized in team-a, but acts in team-b
        status, answer = teams["pat_in_b"].post(url, body)
        assert status == 403, (url, answer)
        assert "'sent-a' belongs to the project 'team-a'" in answer["error"], answer  # type: ignore[index]
    shown = mia.get("/api/v1/labels/sent-a")[1]
    assert shown["progress"]["labels"] == 0  # type: ignore[index]
    with workspace.store.session() as session:
        assert session.scalars(select(LabelLeaseRecord)).all() == []
    # team-a's member labels and exports it, into team-a
    served = mia.post("/api/v1/labels/sent-a/next")[1]
    assert (
        mia.post("/api/v1/labels/sent-a/submit", {"item": served["item"], "label": "pos"})[0] == 200
    )  # type: ignore[index]
    status, exported = mia.post("/api/v1/labels/sent-a/export", {"resolve": "majority"})
    assert status == 201, exported
    with workspace.store.session() as session:
        projects = dict(session.execute(select(Dataset.name, Dataset.project)).all())
    assert projects["reviews-a-labelled"] == "team-a"


def test_a_label_task_name_of_another_project_is_refused_with_409(teams: dict) -> None:
    assert teams["mia"].post("/api/v1/labels", _task("shared", "reviews-a@v1"))[0] == 201

    status, body = teams["pat_in_b"].post("/api/v1/labels", _task("shared", "reviews-b@v1"))

    assert status == 409, body
    assert "exists already, in the project 'team-a'" in body["error"]  # type: ignore[index]
    assert teams["pat_in_b"].get("/api/v1/labels") == (200, [])


def test_a_task_labels_and_exports_the_datasets_of_its_own_project_only(teams: dict) -> None:
    mia = teams["mia"]

    status, body = teams["max"].post("/api/v1/labels", _task("sent-b", "reviews-a@v1"))
    assert status == 403, body
    assert "'reviews-a' belongs to the project 'team-a'" in body["error"]  # type: ignore[index]
    assert teams["max"].get("/api/v1/labels") == (200, [])
    # the dataset exported to must be the task's project's, or new
    assert mia.post("/api/v1/labels", _task("sent-a", "reviews-a@v1"))[0] == 201
    mia.post("/api/v1/labels/sent-a/adjudicate", {"item": 0, "label": "pos"})
    status, body = mia.post("/api/v1/labels/sent-a/export", {"dataset": "reviews-b"})
    assert status == 409, body
    assert "exists already, in the project 'team-b'" in body["error"]  # type: ignore[index]


def test_a_task_whose_dataset_left_its_project_serves_no_item(teams: dict) -> None:
    mia, workspace = teams["mia"], teams["workspace"]
    assert mia.post("/api/v1/labels", _task("sent-a", "reviews-a@v1"))[0] == 201
    with workspace.store.session() as session:
        session.execute(update(Dataset).where(Dataset.name == "reviews-a").values(project="team-b"))

    status, body = mia.post("/api/v1/labels/sent-a/next")

    assert status == 403, body
    assert "'reviews-a' belongs to the project 'team-b'" in body["error"]  # type: ignore[index]
    with workspace.store.session() as session:
        assert session.scalars(select(LabelLeaseRecord)).all() == []


def test_uncertainty_order_reads_a_model_of_the_tasks_project_only(teams: dict) -> None:
    from forgeml.core.ids import new_id
    from forgeml.core.store import ModelVersionRecord
    from forgeml.tracking import RunStatus, finish_run, start_run

    workspace: Workspace = teams["workspace"]
    handle = start_run(workspace.in_project("team-a").acting_as("mia"), {}, "probe", None)
    finish_run(handle, RunStatus.FINISHED, {})
    with workspace.store.session() as session:
        session.add(
            ModelVersionRecord(
                id=new_id(),
                name="clf-a",
                version=1,
                run_id=handle.run_id,
                project="team-a",
                artifact_digest="0" * 64,
                metrics={},
                created_by="mia",
            )
        )
    ranked = _task("sent-b", "reviews-b@v1", strategy="entropy", model="clf-a@v1")

    status, body = teams["max"].post("/api/v1/labels", ranked)

    assert status == 403, body
    assert "'clf-a' belongs to the project 'team-a'" in body["error"]  # type: ignore[index]
    assert teams["max"].post("/api/v1/labels", _task("sent-b", "reviews-b@v1"))[0] == 201
    status, body = teams["max"].post(
        "/api/v1/labels/sent-b/reorder", {"strategy": "margin", "model": "clf-a@v1"}
    )
    assert status == 403 and "'clf-a' belongs to the project 'team-a'" in body["error"]  # type: ignore[index]
