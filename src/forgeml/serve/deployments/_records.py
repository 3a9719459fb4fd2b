"""The deployment records: read them, switch them to a new revision, note failures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from forgeml.core.errors import NotFoundError
from forgeml.core.ids import new_id
from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord, DeploymentRevisionRecord
from forgeml.serve import _supervisor
from forgeml.serve.deployments._spec import Deployment, DeploymentSpec, Replica, resolve_model

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from forgeml.core.workspace import Workspace

_ROLES = ("primary", "canary", "shadow")
# replica statuses the autoscaler's loop sets and clears (see _replicas): a probe
# must not turn a draining replica back into a routed one
LOOP_OWNED = frozenset({"wanted", "starting", "draining"})


@dataclass(frozen=True)
class KeptReplica:
    """A recorded ready replica that a new revision keeps (same process, pid and port)."""

    row_id: str
    role: str
    model_ref: str
    pid: int
    port: int
    started_at: datetime

    @property
    def url(self) -> str:
        return f"http://{_supervisor.HOST}:{self.port}"


class KeptReplicaGoneError(Exception):
    """A replica to keep is no longer recorded ready (scaled away, checked, redeployed)."""


def now() -> datetime:
    """The current UTC time, for `updated_at` / `checked_at`."""
    return datetime.now(UTC)


def list_deployments(
    workspace: Workspace, include_deleted: bool = False, *, project: str | None = None
) -> list[Deployment]:
    """Every deployment (without deleted ones unless asked; of every project, or of
    `project`), by name."""
    with workspace.store.session() as session:
        query = select(DeploymentRecord).order_by(DeploymentRecord.name)
        if project is not None:
            query = query.where(DeploymentRecord.project == project)
        if not include_deleted:
            query = query.where(DeploymentRecord.status != "deleted")
        return [to_deployment(session, record) for record in session.scalars(query)]


def get_deployment(workspace: Workspace, name: str) -> Deployment:
    """The deployment called `name` (deleted ones too).

    Raises:
        NotFoundError: no deployment has that name.
    """
    with workspace.store.session() as session:
        return to_deployment(session, _named(session, name))


def deployments_serving(workspace: Workspace, model_version_ref: str) -> list[str]:
    """Names of the live deployments whose primary, canary or shadow is that version."""
    model = resolve_model(workspace, model_version_ref)
    return [
        deployment.name
        for deployment in list_deployments(workspace)
        if model in {role_model for _, role_model in deployment.spec.plan()}
    ]


def find(workspace: Workspace, name: str) -> DeploymentRecord | None:
    """The record of deployment `name` (detached from its session), or None."""
    with workspace.store.session() as session:
        record = _by_name(session, name)
        if record is not None:
            session.expunge(record)
        return record


def require(workspace: Workspace, name: str) -> DeploymentRecord:
    """The record of live (not deleted) deployment `name`; NotFoundError otherwise."""
    record = find(workspace, name)
    if record is None:
        raise _missing(name)
    if record.status == "deleted":
        raise NotFoundError(f"Deployment '{name}' was deleted; deploy it again to bring it back.")
    return record


def replica_rows(session: Session, deployment_id: str) -> list[DeploymentReplicaRecord]:
    """The replica rows of a deployment: primaries, then canaries, then the shadow."""
    query = select(DeploymentReplicaRecord).where(
        DeploymentReplicaRecord.deployment_id == deployment_id
    )
    return sorted(session.scalars(query), key=lambda row: (_ROLES.index(row.role), row.port))


def to_deployment(session: Session, record: DeploymentRecord) -> Deployment:
    """The public view of a record and its replica rows."""
    replicas = [
        Replica(
            role=row.role,
            model_ref=row.model_ref,
            url=_url(row),
            status=row.status,
            pid=row.pid,
            port=row.port,
            checked_at=row.checked_at,
        )
        for row in replica_rows(session, record.id)
    ]
    return Deployment(
        name=record.name,
        project=record.project,
        spec=DeploymentSpec.model_validate(record.spec),
        status=record.status,
        revision=record.revision,
        created_at=record.created_at,
        updated_at=record.updated_at,
        error=record.error,
        replicas=replicas,
    )


def record_failure(
    workspace: Workspace,
    name: str,
    spec: DeploymentSpec,
    summary: str,
    error: _supervisor.ReplicaStartError,
) -> None:
    """Record why a spec did not start, in `error`: a new or deleted deployment becomes
    "failed"; a live one keeps serving its current revision and status."""
    message = f"{summary}\n{error.log_tail}".strip()
    with workspace.store.session() as session:
        record = _by_name(session, name)
        if record is None:
            record = _add_record(session, workspace, name, spec, "failed", now())
        elif record.status == "deleted":
            record.status = "failed"  # its spec stays that of its last revision
        elif record.revision == 0:
            record.spec = spec.model_dump()  # it never ran: show what was tried last
        record.error, record.updated_at = message, now()
        workspace.audit(
            session, "deployment.fail", name, {"spec": spec.model_dump(), "error": summary}
        )


def ready_replicas(workspace: Workspace, name: str) -> list[KeptReplica]:
    """The replicas recorded "ready", with a pid, of live deployment `name` (none if it
    is missing, deleted or failed): those an update may keep."""
    with workspace.store.session() as session:
        record = _by_name(session, name)
        if record is None or record.status in ("deleted", "failed"):
            return []
        return [
            KeptReplica(row.id, row.role, row.model_ref, row.pid, row.port, row.started_at)
            for row in replica_rows(session, record.id)
            if row.status == "ready" and row.pid is not None
        ]


def switch(
    workspace: Workspace,
    name: str,
    spec: DeploymentSpec,
    servers: Sequence[_supervisor.ServerProcess | KeptReplica],
    action: str,
) -> list[tuple[int, int]]:
    """Record `servers`, one per `spec.plan()` entry, as the replicas of a new revision.

    Each is a server started (and ready) for this revision or a `KeptReplica` of the
    current one, which keeps its process under a new row (a stale row id in the
    autoscaler's hands then matches nothing). One transaction: if a kept replica's row is
    no longer "ready" with the same pid and port, nothing is written.

    Returns the `(pid, port)` of the replicas replaced: every current one not kept.

    Raises:
        KeptReplicaGoneError: a kept replica changed since it was read.
    """
    started = now()
    kept = [server for server in servers if isinstance(server, KeptReplica)]
    with workspace.store.session() as session:
        record = _by_name(session, name)
        if record is None:
            record = _add_record(session, workspace, name, spec, "starting", started)
        old = replica_rows(session, record.id)
        current = {(row.id, row.pid, row.port) for row in old if row.status == "ready"}
        if kept and (
            record.status in ("deleted", "failed")
            or any((replica.row_id, replica.pid, replica.port) not in current for replica in kept)
        ):
            raise KeptReplicaGoneError(f"Deployment '{name}' changed while it was updated.")
        for row in old:
            session.delete(row)
        record.revision += 1
        record.spec, record.status, record.error, record.updated_at = (
            spec.model_dump(),
            "ready",
            None,
            started,
        )
        session.add(
            DeploymentRevisionRecord(
                id=new_id(),
                deployment_id=record.id,
                revision=record.revision,
                spec=spec.model_dump(),
                created_by=workspace.actor,
            )
        )
        for server, (role, model) in zip(servers, spec.plan(), strict=True):
            session.add(
                DeploymentReplicaRecord(
                    id=new_id(),
                    deployment_id=record.id,
                    role=role,
                    model_ref=model,
                    host=_supervisor.HOST,
                    port=server.port,
                    pid=server.pid,
                    status="ready",
                    started_at=server.started_at if isinstance(server, KeptReplica) else started,
                    checked_at=started,
                )
            )
        payload = {
            "revision": record.revision,
            "spec": spec.model_dump(),
            "replicas": [server.url for server in servers],
            "kept": [replica.url for replica in kept],
        }
        workspace.audit(session, action, name, payload)
        keep = {(replica.pid, replica.port) for replica in kept}
        return [
            (row.pid, row.port)
            for row in old
            if row.pid is not None and (row.pid, row.port) not in keep
        ]


def revision_spec(
    workspace: Workspace, record: DeploymentRecord, revision: int
) -> dict[str, Any] | None:
    """The spec `record`'s deployment had at `revision` (None if it never had one)."""
    with workspace.store.session() as session:
        row = session.scalars(
            select(DeploymentRevisionRecord).where(
                DeploymentRevisionRecord.deployment_id == record.id,
                DeploymentRevisionRecord.revision == revision,
            )
        ).one_or_none()
        return None if row is None else dict(row.spec)


def mark_deleted(workspace: Workspace, name: str) -> list[tuple[int, int]]:
    """Mark deployment `name` deleted and drop its replica rows; returns `(pid, port)`s."""
    with workspace.store.session() as session:
        record = _named(session, name)
        replicas = replica_rows(session, record.id)
        servers = [(row.pid, row.port) for row in replicas if row.pid is not None]
        for row in replicas:
            session.delete(row)
        record.status, record.updated_at = "deleted", now()
        payload = {"revision": record.revision, "pids": [pid for pid, _ in servers]}
        workspace.audit(session, "deployment.delete", name, payload)
        return servers


def record_health(workspace: Workspace, found: dict[str, dict[str, str]]) -> None:
    """Store each replica's probed status (`found[name][url]`) and each deployment's
    status derived from them; audit what changed."""
    checked = now()
    changes: dict[str, Any] = {}
    with workspace.store.session() as session:
        for name, urls in found.items():
            record = _named(session, name)
            rows = [
                row
                for row in replica_rows(session, record.id)
                if _url(row) in urls and row.status not in LOOP_OWNED
            ]
            if record.status == "deleted" or not rows:
                continue  # deleted or redeployed while we probed
            changed = {_url(row): urls[_url(row)] for row in rows if row.status != urls[_url(row)]}
            for row in rows:
                row.status, row.checked_at = urls[_url(row)], checked
            status = _deployment_status([(row.role, row.status) for row in rows])
            if changed or status != record.status:
                changes[name] = {"status": status, "replicas": changed}
                record.status, record.updated_at = status, checked
        if changes:
            workspace.audit(session, "deployment.check", "deployments", changes)


def _deployment_status(replicas: list[tuple[str, str]]) -> str:
    """A deployment's status from the `(role, status)` of each of its replicas."""
    if all(status == "ready" for _, status in replicas):
        return "ready"
    if not any(status == "ready" and role == "primary" for role, status in replicas):
        return "failed"
    return "degraded"


def find_in(session: Session, name: str) -> DeploymentRecord | None:
    """The record of deployment `name` in `session`, or None."""
    return _by_name(session, name)


def missing(name: str) -> NotFoundError:
    """The error for a deployment name that names nothing."""
    return _missing(name)


def _by_name(session: Session, name: str) -> DeploymentRecord | None:
    query = select(DeploymentRecord).where(DeploymentRecord.name == name)
    return session.scalars(query).one_or_none()


def _named(session: Session, name: str) -> DeploymentRecord:
    record = _by_name(session, name)
    if record is None:
        raise _missing(name)
    return record


def _missing(name: str) -> NotFoundError:
    return NotFoundError(f"No deployment is named '{name}' (see `forgeml deploy list`).")


def _add_record(
    session: Session,
    workspace: Workspace,
    name: str,
    spec: DeploymentSpec,
    status: str,
    created_at: datetime,
) -> DeploymentRecord:
    """A new deployment record at revision 0 (none has run yet), flushed to the session."""
    record = DeploymentRecord(
        id=new_id(),
        name=name,
        project=workspace.project,
        spec=spec.model_dump(),
        revision=0,
        status=status,
        created_by=workspace.actor,
        created_at=created_at,
    )
    session.add(record)
    session.flush()  # revision and replica rows refer to its id
    return record


def _url(row: DeploymentReplicaRecord) -> str:
    return f"http://{row.host}:{row.port}"
