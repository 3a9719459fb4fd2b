"""Replica rows the autoscaler changes one at a time, without a new revision.

A replica the autoscaler adds lives through these statuses, each a row of
`deployment_replicas` (the gateway routes to `ready` ones only):

    wanted -> starting -> ready -> draining -> (row deleted, process stopped)

`wanted` is a placeholder with no process (port 0): the gateway writes it when a request
reaches a deployment scaled to zero, and the control loop in `forgeml server` starts a
replica for it. One owner starts and stops processes (the loop), whichever process saw
the request, so several gateways cannot start one replica each, and a gateway owns no
child processes. Every write checks the deployment's revision: a redeploy in between
replaces all rows, and a row for the old revision is then refused (`StaleRevision`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select

from forgeml.core.ids import new_id
from forgeml.core.store import DeploymentReplicaRecord
from forgeml.serve import _supervisor
from forgeml.serve.deployments import _records
from forgeml.serve.deployments._spec import DeploymentSpec

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from forgeml.core.workspace import Workspace

WANTED, STARTING, READY, DRAINING = "wanted", "starting", "ready", "draining"
# a deployment whose every replica was scaled away
IDLE = "idle"
# statuses that the loop owns: `deploy check` leaves them alone
SCALING = _records.LOOP_OWNED


class StaleRevisionError(Exception):
    """The deployment was redeployed or deleted since the loop read it."""


@dataclass(frozen=True)
class ScaledReplica:
    """One primary replica row as the loop sees it."""

    id: str
    status: str
    url: str
    pid: int | None
    port: int


@dataclass(frozen=True)
class ScaledDeployment:
    """A live autoscaled deployment: its spec, revision and primary replica rows."""

    name: str
    revision: int
    spec: DeploymentSpec
    replicas: list[ScaledReplica]
    # the deployment's project: its replicas act in it (the RAG indexes they may serve)
    project: str = "default"

    def having(self, *statuses: str) -> list[ScaledReplica]:
        return [replica for replica in self.replicas if replica.status in statuses]


def autoscaled(workspace: Workspace) -> list[ScaledDeployment]:
    """Every live deployment whose spec autoscales."""
    found = []
    with workspace.store.session() as session:
        for record in session.scalars(select(_records.DeploymentRecord)):
            spec = DeploymentSpec.model_validate(record.spec)
            if record.status in ("deleted", "failed") or spec.autoscale is None:
                continue
            rows = [r for r in _records.replica_rows(session, record.id) if r.role == "primary"]
            replicas = [
                ScaledReplica(r.id, r.status, f"http://{r.host}:{r.port}", r.pid, r.port)
                for r in rows
            ]
            found.append(
                ScaledDeployment(record.name, record.revision, spec, replicas, record.project)
            )
    return found


def request_replica(workspace: Workspace, name: str) -> bool:
    """Ask the control loop for a replica of `name` (a caller waits for a cold start).

    Returns whether a `wanted` row was written (not when one is wanted, starting or
    ready already, or the deployment does not autoscale).

    Raises:
        NotFoundError: no live deployment has that name.
    """
    with workspace.store.session() as session:
        record = _live(session, name)
        spec = DeploymentSpec.model_validate(record.spec)
        rows = _records.replica_rows(session, record.id)
        if spec.autoscale is None or any(r.status in (WANTED, STARTING, READY) for r in rows):
            return False
        session.add(_row(record.id, spec.model, WANTED, "", 0, None))
        return True


def add_starting(
    workspace: Workspace, name: str, revision: int, server: _supervisor.ServerProcess
) -> str:
    """Record a started (not yet ready) primary replica; returns its row id.

    Raises:
        StaleRevisionError: the deployment is no longer at `revision`.
    """
    with workspace.store.session() as session:
        record = _at(session, name, revision)
        spec = DeploymentSpec.model_validate(record.spec)
        row = _row(record.id, spec.model, STARTING, _supervisor.HOST, server.port, server.pid)
        session.add(row)
        for wanted in _records.replica_rows(session, record.id):
            if wanted.status == WANTED:
                session.delete(wanted)  # the demand is met by the replica on its way
        return row.id


def set_status(workspace: Workspace, name: str, row_id: str, status: str) -> bool:
    """Set one replica row's status (and the deployment's); False if the row is gone."""
    with workspace.store.session() as session:
        row = session.get(DeploymentReplicaRecord, row_id)
        if row is None:
            return False
        row.status, row.checked_at = status, _records.now()
        record = _live(session, name)
        if status == READY and record.status in (IDLE, "starting"):
            record.status, record.updated_at = READY, _records.now()
        return True


def remove(workspace: Workspace, name: str, row_id: str) -> None:
    """Delete one replica row (its process is stopped or gone); the last makes it idle."""
    with workspace.store.session() as session:
        row = session.get(DeploymentReplicaRecord, row_id)
        if row is None:
            return
        session.delete(row)
        session.flush()
        record = _records.find_in(session, name)
        if record is not None and record.status != "deleted":
            left = _records.replica_rows(session, record.id)
            if not any(r.status in (STARTING, READY, DRAINING) for r in left):
                record.status, record.updated_at = IDLE, _records.now()


def spawn_primary(
    workspace: Workspace, name: str, deployment: ScaledDeployment
) -> _supervisor.ServerProcess:
    """Start one more primary replica of `deployment` (returns at once, not yet ready).

    Raises:
        ReplicaStartError: the process could not be started.
    """
    from forgeml.serve.deployments import _control

    args = _control.server_args(name, deployment.spec, deployment.spec.model, "primary")
    log_path = _control.log_dir(workspace, name) / f"r{deployment.revision}-scaled-{new_id()}.log"
    env = _control.server_env(workspace.in_project(deployment.project))
    return _supervisor.spawn(args, log_path, env)


def audit_scale(workspace: Workspace, name: str, before: int, after: int, why: str) -> None:
    """One audit event per scaling decision carried out."""
    with workspace.store.session() as session:
        payload = {"from": before, "to": after, "reason": why}
        workspace.audit(session, "deployment.scale", name, payload)


def _row(
    deployment_id: str, model: str, status: str, host: str, port: int, pid: int | None
) -> DeploymentReplicaRecord:
    started = _records.now()
    return DeploymentReplicaRecord(
        id=new_id(),
        deployment_id=deployment_id,
        role="primary",
        model_ref=model,
        host=host,
        port=port,
        pid=pid,
        status=status,
        started_at=started,
        checked_at=started,
    )


def _live(session: Session, name: str) -> _records.DeploymentRecord:
    record = _records.find_in(session, name)
    if record is None or record.status == "deleted":
        raise _records.missing(name)
    return record


def _at(session: Session, name: str, revision: int) -> _records.DeploymentRecord:
    record = _records.find_in(session, name)
    if record is None or record.status == "deleted" or record.revision != revision:
        raise StaleRevisionError(f"Deployment '{name}' is no longer at revision {revision}.")
    return record
