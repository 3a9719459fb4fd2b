from __future__ import annotations

import pytest
from sqlalchemy import select

from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord
from forgeml.core.workspace import Workspace
from forgeml.serve import _supervisor, deployments
from forgeml.serve.deployments import _records, _replicas
from tests.gateway.conftest import add_deployment

AUTOSCALE = {"min_replicas": 0, "max_replicas": 2, "target_inflight": 4.0, "target_p99_ms": None}


def autoscale(workspace: Workspace, name: str) -> None:
    with workspace.store.session() as session:
        record = session.scalars(
            select(DeploymentRecord).where(DeploymentRecord.name == name)
        ).one()
        record.spec = {**record.spec, "replicas": 1, "autoscale": AUTOSCALE}


def statuses(workspace: Workspace, name: str) -> list[str]:
    return sorted(r.status for r in deployments.get_deployment(workspace, name).replicas)


def test_a_cold_start_is_asked_for_once_and_only_of_an_autoscaled_deployment(
    sched_workspace: Workspace,
) -> None:
    add_deployment(sched_workspace, "fixed", ["http://127.0.0.1:1"])
    assert deployments.request_replica(sched_workspace, "fixed") is False
    assert statuses(sched_workspace, "fixed") == ["ready"]
    add_deployment(sched_workspace, "elastic", [])
    autoscale(sched_workspace, "elastic")
    assert deployments.request_replica(sched_workspace, "elastic") is True
    assert deployments.request_replica(sched_workspace, "elastic") is False  # asked already
    assert statuses(sched_workspace, "elastic") == ["wanted"]
    (scaled,) = [d for d in deployments.autoscaled(sched_workspace) if d.name == "elastic"]
    assert [r.status for r in scaled.replicas] == ["wanted"]
    assert [d.name for d in deployments.autoscaled(sched_workspace)] == ["elastic"]


def test_a_replica_recorded_for_an_old_revision_is_refused_and_the_wanted_row_kept(
    sched_workspace: Workspace, tmp_path: object
) -> None:
    add_deployment(sched_workspace, "elastic", [])
    autoscale(sched_workspace, "elastic")
    deployments.request_replica(sched_workspace, "elastic")
    server = _supervisor.ServerProcess(pid=123456, port=45678, log_path=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(deployments.StaleRevisionError):
        _replicas.add_starting(sched_workspace, "elastic", 7, server)
    assert statuses(sched_workspace, "elastic") == ["wanted"]
    row_id = _replicas.add_starting(sched_workspace, "elastic", 1, server)
    assert statuses(sched_workspace, "elastic") == ["starting"]  # the demand is met
    assert _replicas.set_status(sched_workspace, "elastic", row_id, _replicas.READY)
    _replicas.remove(sched_workspace, "elastic", row_id)
    assert deployments.get_deployment(sched_workspace, "elastic").status == "idle"


def test_a_health_check_leaves_the_rows_the_loop_owns_alone(sched_workspace: Workspace) -> None:
    add_deployment(sched_workspace, "elastic", ["http://127.0.0.1:1", "http://127.0.0.1:2"])
    with sched_workspace.store.session() as session:
        row = session.scalars(
            select(DeploymentReplicaRecord).where(DeploymentReplicaRecord.port == 2)
        ).one()
        row.status = "draining"
    found = {"elastic": {"http://127.0.0.1:1": "ready", "http://127.0.0.1:2": "ready"}}
    _records.record_health(sched_workspace, found)
    assert statuses(sched_workspace, "elastic") == ["draining", "ready"]
    assert deployments.get_deployment(sched_workspace, "elastic").status == "ready"
