from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from forgeml.core.errors import AlreadyExistsError, OtherProjectError
from forgeml.core.store import JobRecord
from forgeml.core.workspace import Workspace
from forgeml.data import pipeline as data_pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.pipelines import find_run, list_runs
from forgeml.pipelines.triggers import (
    add_trigger,
    evaluate_triggers,
    list_firings,
    list_triggers,
    remove_trigger,
)
from tests.data.conftest import write_table_csv
from tests.pipelines.conftest import HELLO_PIPELINE, run, steps_by_name, write_pipeline
from tests.pipelines.test_triggers import T0

ADD_SHARED = """
name: ingest
steps:
  - {name: add, kind: data, add: small.csv, dataset: shared}
"""


def _job_projects(workspace: Workspace, summary: dict[str, Any]) -> list[str]:
    ids = [step["job_id"] for step in summary["steps"]]
    with workspace.store.session() as session:
        return list(session.scalars(select(JobRecord.project).where(JobRecord.id.in_(ids))))


def test_a_run_and_its_steps_jobs_belong_to_the_project_it_ran_in(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path, HELLO_PIPELINE)
    in_a, in_b = any_workspace.in_project("team-a"), any_workspace.in_project("team-b")

    summary = run(in_a, path)

    assert summary["state"] == "SUCCEEDED" and summary["project"] == "team-a"
    assert _job_projects(any_workspace, summary) == ["team-a"]
    assert [r.id for r in list_runs(in_a)] == [summary["id"]]
    assert list_runs(in_b) == [] and list_runs(any_workspace) == []
    # a name finds its own project's latest run first (pipeline names are not unique)
    again = run(in_b, path)
    assert find_run(in_b, "hello").id == again["id"]
    assert find_run(in_a, "hello").id == summary["id"]


def test_a_step_never_reuses_the_cached_outputs_of_another_projects_step(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path, HELLO_PIPELINE)
    in_a, in_b = any_workspace.in_project("team-a"), any_workspace.in_project("team-b")
    run(in_a, path)

    again_in_a, first_in_b = run(in_a, path), run(in_b, path)

    assert [step["cached"] for step in again_in_a["steps"]] == [True]
    # the same step, key for key but the project: it runs as team-b's own job
    assert [step["cached"] for step in first_in_b["steps"]] == [False]
    assert _job_projects(any_workspace, first_in_b) == ["team-b"]
    assert [step["cached"] for step in run(in_b, path)["steps"]] == [True]


def test_a_step_cannot_write_into_a_dataset_of_another_project(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    csv = write_table_csv(tmp_path / "small.csv")
    in_a = any_workspace.in_project("team-a")
    data_pipeline.add(in_a, "shared", csv, IngestOptions())
    path = write_pipeline(tmp_path, ADD_SHARED)

    summary = run(any_workspace.in_project("team-b"), path)

    step = steps_by_name(summary)["add"]
    assert summary["state"] == "FAILED" and step["state"] == "FAILED"
    assert "exists already, in the project 'team-a'" in step["error"]
    assert _job_projects(any_workspace, summary) == ["team-b"]


class _Recorder:
    """A `submit` that records the project each job is submitted in."""

    def __init__(self) -> None:
        self.projects: list[str] = []

    def __call__(self, workspace: Workspace, fields: dict[str, Any]) -> str:
        self.projects.append(workspace.project)
        return f"job{len(self.projects)}"


def test_a_trigger_belongs_to_its_project_and_fires_there(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path, HELLO_PIPELINE)
    in_a, in_b = any_workspace.in_project("team-a"), any_workspace.in_project("team-b")
    add_trigger(in_a, "every5", path, cron="*/5 * * * *", now=T0)

    with pytest.raises(AlreadyExistsError, match="exists already, in the project 'team-a'"):
        add_trigger(in_b, "every5", path, cron="*/5 * * * *", now=T0)
    assert [t.name for t in list_triggers(in_a)] == ["every5"]
    assert list_triggers(in_b) == [] and list_triggers(any_workspace) == []
    with pytest.raises(OtherProjectError, match="'every5' belongs to the project 'team-a'"):
        remove_trigger(in_b, "every5")

    submit = _Recorder()
    from datetime import timedelta

    fired = evaluate_triggers(any_workspace, T0 + timedelta(minutes=5), submit=submit)

    assert len(fired) == 1 and submit.projects == ["team-a"]
    assert [f.trigger for f in list_firings(in_a)] == ["every5"]
    assert list_firings(in_b) == []


def test_a_trigger_watches_a_dataset_of_its_own_project_only(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    csv = write_table_csv(tmp_path / "small.csv")
    data_pipeline.add(any_workspace.in_project("team-a"), "small", csv, IngestOptions())
    path = write_pipeline(tmp_path, HELLO_PIPELINE)

    with pytest.raises(OtherProjectError, match="'small' belongs to the project 'team-a'"):
        add_trigger(any_workspace.in_project("team-b"), "on-small", path, dataset="small")
    add_trigger(any_workspace.in_project("team-a"), "on-small", path, dataset="small")


PROMOTE_MLP_A = """
name: release
steps:
  - {name: promote, kind: promote, model: mlp-a@v1, alias: production}
"""


def _mlp_a(workspace: Workspace, tmp_path: Path) -> None:
    """team-a's model version mlp-a@v1, as registration records it (no bundle: a promotion
    only moves its alias)."""
    from forgeml.core.ids import new_id
    from forgeml.core.store import ModelVersionRecord
    from forgeml.tracking import RunStatus, finish_run, start_run
    from forgeml.tracking._mlflow import open_client

    in_a = workspace.in_project("team-a")
    handle = start_run(in_a, {"lr": 0.1}, "probe", None)
    finish_run(handle, RunStatus.FINISHED, {"accuracy": 0.5})
    client = open_client(in_a)
    client.create_registered_model("mlp-a")
    client.create_model_version("mlp-a", str(tmp_path / "bundle"), run_id=handle.run_id)
    with workspace.store.session() as session:
        session.add(
            ModelVersionRecord(id=new_id(), name="mlp-a", version=1, run_id=handle.run_id,
                               project="team-a", artifact_digest="0" * 64,
                               metrics={"accuracy": 0.5}, created_by="tester")
        )  # fmt: skip


def test_a_release_step_promotes_a_model_of_its_own_project_only(
    any_workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.core.store import AuditEvent

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _mlp_a(any_workspace, tmp_path)
    path = write_pipeline(tmp_path, PROMOTE_MLP_A)

    summary = run(any_workspace.in_project("team-b"), path)

    step = steps_by_name(summary)["promote"]
    assert summary["state"] == "FAILED" and step["state"] == "FAILED"
    assert "Model 'mlp-a' belongs to the project 'team-a', not 'team-b'" in step["error"]
    with any_workspace.store.session() as session:
        promoted = select(AuditEvent).where(AuditEvent.action.startswith("model.promote"))
        assert session.scalars(promoted).all() == []
    released = run(any_workspace.in_project("team-a"), path)
    assert released["state"] == "SUCCEEDED", steps_by_name(released)["promote"]
    assert steps_by_name(released)["promote"]["outputs"]["model"] == "mlp-a@v1"


def test_a_canary_step_that_moves_another_projects_alias_is_refused_before_it_starts(
    any_workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.pipelines.release import run_canary
    from forgeml.pipelines.steps import CanaryStep
    from forgeml.serve.deployments import get_deployment
    from tests.gateway.conftest import add_deployment

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _mlp_a(any_workspace, tmp_path)
    in_b = any_workspace.in_project("team-b")
    add_deployment(in_b, "web-b", ["http://127.0.0.1:9"])
    fields = {"name": "canary", "kind": "canary", "deployment": "web-b", "model": "mlp-a@v1"}

    def never(_: float) -> None:
        pytest.fail("the canary was watched")

    with pytest.raises(OtherProjectError, match="'mlp-a' belongs to the project 'team-a'"):
        run_canary(in_b, CanaryStep.model_validate(fields | {"alias": "production"}),
                   clock=lambda: 0.0, sleep=never)  # fmt: skip
    assert get_deployment(in_b, "web-b").spec.canary is None
