"""Queues: create, list, show. A `default` queue (weight 1, reclaimable) exists from first use.

Queues are install-wide, shared capacity every project submits to (as Volcano's queues or
Kueue's ClusterQueues): they carry no project, any project's reader may list and show them,
and only default's maintainers create them. What a show says of the jobs in a queue is its
load, counted by state over every project; it names no job, so no project learns another's
job names, owners or ids from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forgeml.core.errors import AlreadyExistsError, InvalidNameError, NotFoundError, UsageError
from forgeml.core.ids import validate_name
from forgeml.core.store import QueueRecord
from forgeml.scheduler.model import QueueSpec, QueueState, Resources

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

DEFAULT_QUEUE = "default"


def ensure_default_queue(session: Session, actor: str) -> QueueRecord:
    """The `default` queue, created (weight 1, reclaimable, no cap) when missing."""
    record = session.get(QueueRecord, DEFAULT_QUEUE)
    if record is None:
        record = QueueRecord(
            name=DEFAULT_QUEUE, weight=1, capability=None, reclaimable=True, created_by=actor
        )
        session.add(record)
        session.flush()
    return record


def parse_queue(fields: dict[str, Any]) -> QueueSpec:
    """A validated `QueueSpec`, or one sentence naming the bad field.

    Raises:
        UsageError: a field is out of range (weight < 1, negative capability or budget).
    """
    try:
        return QueueSpec.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UsageError(f"Invalid queue {where}: {first['msg'].lower()}.") from None


def create_queue(workspace: Workspace, spec: QueueSpec) -> QueueRecord:
    """Create a queue (audited).

    Raises:
        AlreadyExistsError: a queue of that name exists already.
        InvalidNameError: the name is not a plain identifier.
    """
    validate_name(spec.name, "queue name")
    with workspace.store.session() as session:
        if session.get(QueueRecord, spec.name) is not None:
            raise AlreadyExistsError(f"Queue '{spec.name}' already exists.")
        record = QueueRecord(
            name=spec.name,
            weight=spec.weight,
            # only the capped dimensions: a cap on GPUs alone leaves CPUs and memory free
            capability=spec.capability.model_dump(exclude_unset=True) if spec.capability else None,
            reclaimable=spec.reclaimable,
            budget=spec.budget,
            created_by=workspace.actor,
        )
        session.add(record)
        session.flush()
        payload = queue_summary(record)
        del payload["created_at"]
        workspace.audit(session, "queue.create", f"queue:{spec.name}", payload)
    return record


def list_queues(workspace: Workspace) -> list[QueueRecord]:
    """Every queue, by name (the default one included)."""
    query = select(QueueRecord).order_by(QueueRecord.name)
    with workspace.store.session() as session:
        found = list(session.scalars(query))
    if any(queue.name == DEFAULT_QUEUE for queue in found):
        return found
    # the first list creates `default`: a write even when a read asked
    with workspace.store.session(write=True) as session:
        ensure_default_queue(session, workspace.actor)
        return list(session.scalars(query))


def get_queue(session: Session, name: str) -> QueueRecord:
    """The queue `name` (`default` is created on first use).

    Raises:
        NotFoundError: no such queue.
    """
    if name == DEFAULT_QUEUE:
        return ensure_default_queue(session, "forgeml")
    try:
        validate_name(name, "queue name")
    except InvalidNameError:
        raise NotFoundError(f"No queue named '{name}'.") from None
    record = session.get(QueueRecord, name)
    if record is None:
        raise NotFoundError(
            f"No queue named '{name}'; create it with `forgeml queues create {name}`."
        )
    return record


def show_queue(workspace: Workspace, name: str) -> QueueRecord:
    """The queue `name`.

    Raises:
        NotFoundError: no such queue.
    """
    with workspace.store.session() as session:
        return get_queue(session, name)


def capability_of(record: QueueRecord) -> Resources | None:
    """The queue's hard cap as `Resources`, or None when it has none."""
    if record.capability is None:
        return None
    cap = record.capability
    unlimited = float("inf")
    return Resources(
        float(cap.get("cpus", unlimited)),
        int(cap.get("gpus", 1 << 30)),
        float(cap.get("memory_gb", unlimited)),
    )


def queue_state(record: QueueRecord) -> QueueState:
    """The policy's view of a queue."""
    return QueueState(record.name, record.weight, capability_of(record), record.reclaimable)


def queue_summary(record: QueueRecord) -> dict[str, Any]:
    """The queue as plain JSON-ready data."""
    return {
        "name": record.name,
        "weight": record.weight,
        "capability": record.capability,
        "reclaimable": record.reclaimable,
        "budget": record.budget,
        "created_at": record.created_at,
        "created_by": record.created_by,
    }


def queue_detail(workspace: Workspace, name: str) -> dict[str, Any]:
    """What `queues show` answers: the queue's summary and its jobs counted by state, the
    jobs of every project (the shared queue's load: counts only, no job named)."""
    from forgeml.core.store import JobRecord

    # `default` is created on first use: a write even when a read asked
    with workspace.store.session(write=True if name == DEFAULT_QUEUE else None) as session:
        record = get_queue(session, name)
        counts = dict(
            session.execute(
                select(JobRecord.state, func.count())
                .where(JobRecord.queue == name)
                .group_by(JobRecord.state)
            ).all()
        )
    return queue_summary(record) | {"jobs": {str(k): int(v) for k, v in counts.items()}}
