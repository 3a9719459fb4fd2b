"""Alerts belong to the project of the subject their labels name, whoever records them
(forgeml's own rules or Alertmanager's webhook); lists show the workspace's project's only
and an acknowledgement acts in the alert's project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.core.config import Settings
from forgeml.core.errors import InvalidRequestError, NotFoundError, OtherProjectError
from forgeml.core.ids import new_id
from forgeml.core.store import AlertRecord, Dataset, ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import (
    AlertEvaluator,
    SampleStore,
    ack_alert,
    get_alert,
    labels_of,
    list_alerts,
    parse_message,
    parse_rules,
    receive,
)
from forgeml.monitor.alerts._subjects import alert_project
from forgeml.serve.deployments import DeploymentSpec, _records
from forgeml.tracking import RunStatus, finish_run, start_run
from tests.monitor.alerts.conftest import FakeClock

RULES = """
groups:
  - name: test
    rules:
      - alert: DepthHigh
        expr: max by (model) (queue_depth) > 3
        labels: {severity: warning}
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    """On both stores (PostgreSQL when one answers), as the state machine's tests."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester", db_url=url))
    try:
        yield workspace
    finally:
        workspace.close()


def _deployment(workspace: Workspace, name: str, project: str) -> None:
    spec = DeploymentSpec(model="adult-mlp@v2", model_ref="adult-mlp@v2", replicas=1)
    owner = workspace.in_project(project).acting_as("tara")
    with workspace.store.session() as session:
        _records._add_record(session, owner, name, spec, "failed", _records.now())


def _model(workspace: Workspace, name: str, project: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    handle = start_run(workspace.in_project(project), {"lr": 0.1}, "probe", None)
    finish_run(handle, RunStatus.FINISHED, {"accuracy": 0.5})
    with workspace.store.session() as session:
        session.add(
            ModelVersionRecord(
                id=new_id(), name=name, version=1, run_id=handle.run_id, project=project,
                artifact_digest="0" * 64, metrics={}, created_by="tara",
            )
        )  # fmt: skip


def _dataset(workspace: Workspace, name: str, project: str) -> None:
    with workspace.store.session() as session:
        session.add(Dataset(id=new_id(), name=name, project=project, created_by="tara"))


def test_the_labels_subject_names_the_alerts_project(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _deployment(workspace, "web", "team-a")
    _model(workspace, "mlp-b", "team-b", monkeypatch)
    _dataset(workspace, "iris-c", "team-c")

    cases = {
        "team-a": [{"deployment": "web"}, {"model": "web"}, {"model": "web", "dataset": "iris-c"}],
        "team-b": [{"model": "mlp-b"}, {"model": "mlp-b@v1"}, {"deployment": "x", "model": "mlp-b"},
                   {"dataset": "gone", "model": "mlp-b"}],
        "team-c": [{"dataset": "iris-c"}, {"deployment": "gone", "dataset": "iris-c"}],
        # a queue's, a GPU's, an unknown name, Prometheus' scrape job: nothing partitioned
        "default": [{}, {"queue": "gpu"}, {"model": "nosuch"}, {"job": "web", "instance": "web"}],
    }  # fmt: skip
    with workspace.store.session() as session:
        found = {
            project: [alert_project(session, labels) for labels in labels_list]
            for project, labels_list in cases.items()
        }
    assert found == {project: [project] * len(labels) for project, labels in cases.items()}


def _evaluate(workspace: Workspace, clock: FakeClock, **depths: float) -> None:
    samples = SampleStore()
    evaluator = AlertEvaluator(
        workspace, parse_rules(RULES, "test.yml"), samples=samples, clock=clock,
        scrape_replicas=False,
    )  # fmt: skip
    samples.ingest(
        "test",
        [(labels_of({"__name__": "queue_depth", "model": m}), v) for m, v in depths.items()],
        clock(),
    )
    evaluator.cycle()


def _listed(workspace: Workspace, project: str) -> list[str]:
    return sorted(alert.labels["model"] for alert in list_alerts(workspace.in_project(project)))


def test_the_evaluator_files_each_alert_in_its_deployments_project(
    workspace: Workspace, clock: FakeClock
) -> None:
    _deployment(workspace, "web", "team-a")

    # the evaluator acts in default (forgeml server's workspace) whatever it files
    _evaluate(workspace, clock, web=5, lonely=5, idle=1)

    assert _listed(workspace, "team-a") == ["web"]
    assert _listed(workspace, "default") == ["lonely"]
    assert _listed(workspace, "team-b") == []


def _message(labels: dict[str, str], fingerprint: str, status: str = "firing") -> dict:
    alert = {"status": status, "labels": {"alertname": "Backlog", **labels}, "annotations": {},
             "startsAt": "2026-12-03T10:00:00Z", "fingerprint": fingerprint}  # fmt: skip
    return {"version": "4", "status": status, "receiver": "r", "alerts": [alert]}


def test_the_receiver_files_each_alert_in_its_subjects_project(workspace: Workspace) -> None:
    _deployment(workspace, "web", "team-a")
    receiver = workspace.in_project("team-b")  # whatever project its caller acts in

    receive(receiver, parse_message(_message({"model": "web"}, "f1")))
    receive(receiver, parse_message(_message({"model": "lonely"}, "f2")))

    assert _listed(workspace, "team-a") == ["web"]
    assert _listed(workspace, "default") == ["lonely"]
    assert _listed(workspace, "team-b") == []
    # its resolution, sent without the subject's project, resolves the same row
    receive(receiver, parse_message(_message({"model": "web"}, "f1", "resolved")))
    [alert] = list_alerts(workspace.in_project("team-a"))
    assert (alert.state, alert.project) == ("resolved", "team-a")


def test_an_alert_is_acknowledged_in_its_own_project_only(workspace: Workspace) -> None:
    _deployment(workspace, "web", "team-a")
    receive(workspace, parse_message(_message({"deployment": "web"}, "f1")))
    [alert] = list_alerts(workspace.in_project("team-a"))

    for project in ("team-b", "default"):
        other = workspace.in_project(project).acting_as("bob")
        with pytest.raises(OtherProjectError, match="belongs to the project 'team-a'"):
            ack_alert(other, alert.id[:8])
        # an item read finds it by its id from any project (the API authorizes it there)
        assert get_alert(other, alert.id).project == "team-a"
    assert get_alert(workspace, alert.id).acked_by is None

    acked = ack_alert(workspace.in_project("team-a").acting_as("tara"), alert.id[:8])

    assert (acked.acked_by, acked.project) == ("tara", "team-a")


def test_an_id_prefix_finds_the_workspaces_projects_alert_first(workspace: Workspace) -> None:
    with workspace.store.session() as session:
        for alert_id, project in (("ab12", "team-a"), ("ab34", "team-b"), ("cd56", "team-b"),
                                  ("cd78", "team-b")):  # fmt: skip
            session.add(
                AlertRecord(
                    id=alert_id, project=project, fingerprint=alert_id, rule="r", labels={},
                    annotations={}, state="firing", started_at=_records.now(), source="forgeml",
                )
            )  # fmt: skip

    assert get_alert(workspace.in_project("team-a"), "ab").id == "ab12"
    assert get_alert(workspace.in_project("team-b"), "ab").id == "ab34"
    with pytest.raises(InvalidRequestError, match="matches more than one alert"):
        get_alert(workspace.in_project("default"), "ab")
    with pytest.raises(InvalidRequestError, match="matches more than one alert"):
        get_alert(workspace.in_project("team-b"), "cd")
    assert get_alert(workspace.in_project("team-a"), "cd5").id == "cd56"
    for unknown in ("", "zz"):
        with pytest.raises(NotFoundError, match="No alert has the id"):
            get_alert(workspace, unknown)
