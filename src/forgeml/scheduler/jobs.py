"""Jobs: submit (validated against the cluster and the queue), list, show, cancel, retry.

Every state change goes through `transition`, which appends a `job_events` row in the
caller's transaction; submit, cancel, retry and preempt also write an audit event. A job's
`scratch` folder (a command job's uploads) is removed once its final state is committed,
whichever way it ended; its log is kept where every job's is.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import Select, case, event, func, select
from sqlalchemy.orm import Session

from forgeml.core.errors import InvalidJobError, JobStateError, NotFoundError, UsageError
from forgeml.core.ids import new_id
from forgeml.core.store import JobAttemptRecord, JobEventRecord, JobRecord
from forgeml.scheduler.model import PRIORITY_CLASSES, JobSpec, JobState, NodeState, Resources
from forgeml.scheduler.queues import capability_of, get_queue

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

# Audited transitions: to_state -> audit action (submit and retry are audited where they happen)
_AUDITED = {JobState.CANCELLED: "job.cancel", JobState.PREEMPTED: "job.preempt"}
_HEX_PREFIX = re.compile(r"^[0-9a-f]{4,32}$")


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_spec(fields: dict[str, Any]) -> JobSpec:
    """A validated `JobSpec`, or one sentence naming the first bad field.

    Raises:
        InvalidJobError: a field is missing, of the wrong type or out of range.
    """
    try:
        spec = JobSpec.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "spec"
        raise InvalidJobError(f"Invalid job {where}: {first['msg'].lower()}.") from None
    if spec.priority not in PRIORITY_CLASSES:
        raise InvalidJobError(
            f"Unknown priority class '{spec.priority}': use one of {', '.join(PRIORITY_CLASSES)}."
        )
    return spec


def _describe(resources: Resources) -> str:
    return f"{resources.cpus:g} CPUs, {resources.gpus} GPUs, {resources.memory_gb:g} GB"


def check_fits(spec: JobSpec, nodes: Sequence[NodeState], cap: Resources | None) -> None:
    """Refuse a request that could never run, whatever else is running.

    Raises:
        InvalidJobError: the job exceeds its queue's capability, a worker fits on no node,
            or the gang exceeds the whole cluster (the last two only when `nodes` is known).
    """
    worker = spec.resources.to_resources()
    total = worker.times(spec.workers)
    if cap is not None and not total.fits_in(cap):
        raise InvalidJobError(
            f"Job '{spec.name}' can never run in queue '{spec.queue}': it needs "
            f"{_describe(total)}, over the queue's capability."
        )
    if not nodes:  # a cluster this process cannot see (Ray, Kubernetes): it decides
        return
    if not any(worker.fits_in(node.capacity) for node in nodes):
        biggest = max((node.capacity for node in nodes), key=lambda r: (r.gpus, r.cpus))
        raise InvalidJobError(
            f"Job '{spec.name}' can never run: one worker needs {_describe(worker)} "
            f"but the largest node has {_describe(biggest)}."
        )
    cluster = Resources()
    for node in nodes:
        cluster = cluster + node.capacity
    slots = sum(_slots(worker, node.capacity) for node in nodes)
    if not total.fits_in(cluster) or slots < spec.workers:
        raise InvalidJobError(
            f"Job '{spec.name}' can never run: {spec.workers} workers need "
            f"{_describe(total)} but the cluster has {_describe(cluster)}."
        )


def _slots(worker: Resources, capacity: Resources) -> int:
    """How many workers of this size one node can hold."""
    limits = [
        capacity.cpus / worker.cpus if worker.cpus else float("inf"),
        capacity.gpus / worker.gpus if worker.gpus else float("inf"),
        capacity.memory_gb / worker.memory_gb if worker.memory_gb else float("inf"),
    ]
    smallest = min(limits)
    return 1 << 30 if smallest == float("inf") else int(smallest + 1e-9)


def submit(
    workspace: Workspace,
    spec: JobSpec,
    *,
    nodes: Sequence[NodeState],
    executor: str = "local",
    model_name: str | None = None,
) -> JobRecord:
    """Record a job PENDING in its queue (audited).

    Args:
        workspace: where the job is recorded.
        spec: the validated spec (see `parse_spec`).
        nodes: the cluster the job must fit on (see `forgeml.scheduler.cluster`).
        executor: the executor expected to run it.
        model_name: the config's `name` for train/finetune/tune jobs (for cost reports).

    Raises:
        NotFoundError: the queue does not exist.
        InvalidJobError: the request can never fit the cluster or the queue.
    """
    with workspace.store.session() as session:
        queue = get_queue(session, spec.queue)
        check_fits(spec, nodes, capability_of(queue))
        now = utcnow()
        job = JobRecord(
            id=new_id(),
            name=spec.name,
            project=workspace.project,
            kind=spec.kind,
            spec=spec.model_dump(mode="json"),
            queue=queue.name,
            priority=spec.priority_value,
            owner=spec.owner,
            state=JobState.PENDING.value,
            executor=executor,
            model_name=model_name,
            attempts=0,
            cancel_requested=False,
            submitted_at=now,
            updated_at=now,
        )
        session.add(job)
        session.flush()
        session.add(JobEventRecord(job_id=job.id, at=now, to_state=job.state, reason="submitted"))
        workspace.audit(
            session, "job.submit", f"job:{job.id}", {"name": spec.name, "queue": queue.name}
        )
    return job


def transition(
    session: Session,
    job: JobRecord,
    to_state: JobState,
    *,
    reason: str | None = None,
    attempt: int | None = None,
    workspace: Workspace | None = None,
) -> None:
    """Move `job` to `to_state`, appending the event (and the audit event when one is due)."""
    now = utcnow()
    session.add(
        JobEventRecord(
            job_id=job.id,
            attempt=attempt,
            at=now,
            from_state=job.state,
            to_state=to_state.value,
            reason=reason,
        )
    )
    job.state = to_state.value
    job.updated_at = now
    action = _AUDITED.get(to_state)
    if workspace is not None and action is not None:
        workspace.audit(session, action, f"job:{job.id}", {"reason": reason, "attempt": attempt})
    scratch = job.spec.get("scratch")
    if to_state.is_final and scratch:
        _remove_on_commit(session, Path(scratch))
    session.flush()


def _remove_on_commit(session: Session, folder: Path) -> None:
    # after the commit: a transition rolled back leaves the job, and its files, as they were
    def remove(_: Session) -> None:
        shutil.rmtree(folder, ignore_errors=True)

    event.listen(session, "after_commit", remove, once=True)


def get_job(session: Session, ref: str, project: str | None = None) -> JobRecord:
    """A job by id, unique id prefix (4+ hex characters) or name (the latest such job;
    `project`'s latest first when it has one: job names are not unique across projects).

    Raises:
        NotFoundError: no job matches.
        UsageError: the id prefix matches several jobs.
    """
    job = session.get(JobRecord, ref)
    if job is not None:
        return job
    if _HEX_PREFIX.match(ref):
        matches = list(session.scalars(select(JobRecord).where(JobRecord.id.startswith(ref))))
        if len(matches) > 1:
            raise UsageError(f"Job id prefix '{ref}' is ambiguous; give more characters.")
        if matches:
            return matches[0]
    query = select(JobRecord).where(JobRecord.name == ref)
    if project is not None:
        query = query.order_by(case((JobRecord.project == project, 0), else_=1))
    latest = session.scalars(query.order_by(JobRecord.submitted_at.desc())).first()
    if latest is None:
        raise NotFoundError(f"No job '{ref}'; see `forgeml jobs list`.")
    return latest


def find_job(workspace: Workspace, ref: str) -> JobRecord:
    """`get_job` in its own transaction (a name: the workspace project's job first)."""
    with workspace.store.session() as session:
        return get_job(session, ref, workspace.project)


def jobs_query(
    states: Sequence[str] | None = None,
    queue: str | None = None,
    project: str | None = None,
) -> Select[JobRecord]:
    """Jobs, unordered, optionally only in `states`, `queue` or `project` (callers order and
    page it)."""
    query = select(JobRecord)
    if project is not None:
        query = query.where(JobRecord.project == project)
    if states:
        query = query.where(JobRecord.state.in_(list(states)))
    if queue:
        query = query.where(JobRecord.queue == queue)
    return query


def list_jobs(
    workspace: Workspace,
    *,
    states: Sequence[str] | None = None,
    queue: str | None = None,
    limit: int | None = None,
    project: str | None = None,
) -> list[JobRecord]:
    """Jobs, newest first, optionally only in `states`, `queue` or `project` (None: every
    project's)."""
    query = jobs_query(states, queue, project).order_by(JobRecord.submitted_at.desc())
    if limit:
        query = query.limit(limit)
    with workspace.store.session() as session:
        return list(session.scalars(query))


def attempts_of(session: Session, job_id: str) -> list[JobAttemptRecord]:
    """The job's attempts, first first."""
    query = select(JobAttemptRecord).where(JobAttemptRecord.job_id == job_id)
    return list(session.scalars(query.order_by(JobAttemptRecord.number)))


def events_of(session: Session, job_id: str) -> list[JobEventRecord]:
    """The job's state changes, oldest first."""
    query = select(JobEventRecord).where(JobEventRecord.job_id == job_id)
    return list(session.scalars(query.order_by(JobEventRecord.id)))


def failed_attempts(session: Session, job_id: str) -> int:
    """How many of the job's attempts failed (preempted ones do not count)."""
    query = select(func.count()).where(
        JobAttemptRecord.job_id == job_id, JobAttemptRecord.state == JobState.FAILED.value
    )
    return int(session.scalar(query) or 0)


def cancel(workspace: Workspace, ref: str) -> JobRecord:
    """Cancel a job: at once when it waits, through the service when it runs (audited).

    Raises:
        NotFoundError: no such job.
        JobStateError: the job already ended.
    """
    with workspace.store.session() as session:
        job = get_job(session, ref, workspace.project)
        state = JobState(job.state)
        if state.is_final:
            raise JobStateError(f"Job {job.id} already ended {state.value}; nothing to cancel.")
        if state is JobState.PENDING:
            transition(session, job, JobState.CANCELLED, reason="cancelled", workspace=workspace)
        else:
            job.cancel_requested = True
            job.updated_at = utcnow()
            workspace.audit(session, "job.cancel", f"job:{job.id}", {"requested": True})
    return job


def retry(workspace: Workspace, ref: str) -> JobRecord:
    """Queue a FAILED or CANCELLED job again (audited).

    Raises:
        NotFoundError: no such job.
        JobStateError: the job has not ended, or it succeeded, or its scratch folder (the
            files a command job was sent with) was removed when it ended.
    """
    with workspace.store.session() as session:
        job = get_job(session, ref, workspace.project)
        if job.state not in (JobState.FAILED, JobState.CANCELLED):
            raise JobStateError(
                f"Job {job.id} is {job.state}; only FAILED or CANCELLED jobs can be retried."
            )
        scratch = job.spec.get("scratch")
        if scratch and not Path(scratch).is_dir():
            raise JobStateError(
                f"Job {job.id}'s files were removed when it ended; run its command again."
            )
        job.cancel_requested = False
        job.next_attempt_at = None
        job.error = None
        transition(session, job, JobState.PENDING, reason="retried by " + workspace.actor)
        workspace.audit(session, "job.retry", f"job:{job.id}", {"attempts": job.attempts})
    return job


def job_summary(job: JobRecord) -> dict[str, Any]:
    """The job as plain JSON-ready data."""
    spec = job.spec
    return {
        "job_id": job.id,
        "name": job.name,
        "kind": job.kind,
        "state": job.state,
        "queue": job.queue,
        "priority": spec.get("priority"),
        "owner": job.owner,
        "executor": job.executor,
        "model_name": job.model_name,
        "command": spec.get("command"),
        "resources": spec.get("resources"),
        "workers": spec.get("workers"),
        "attempts": job.attempts,
        "cancel_requested": job.cancel_requested,
        "next_attempt_at": job.next_attempt_at,
        "submitted_at": job.submitted_at,
        "updated_at": job.updated_at,
        "error": job.error,
    }


def attempt_summary(attempt: JobAttemptRecord) -> dict[str, Any]:
    """One attempt as plain JSON-ready data: where it ran, how it ended, what it used."""
    return {
        "number": attempt.number,
        "state": attempt.state,
        "executor": attempt.executor,
        "nodes": attempt.nodes,
        "started_at": attempt.started_at,
        "ended_at": attempt.ended_at,
        "exit_code": attempt.exit_code,
        "reason": attempt.reason,
        "log_digest": attempt.log_digest,
        "cpu_seconds": attempt.cpu_seconds,
        "gpu_seconds": attempt.gpu_seconds,
        "memory_gb_seconds": attempt.memory_gb_seconds,
        "peak_memory_gb": attempt.peak_memory_gb,
        "wall_seconds": attempt.wall_seconds,
        "gpu_utilization": attempt.gpu_utilization,
        "gpu_peak_memory_bytes": attempt.gpu_peak_memory_bytes,
        "gpu_energy_joules": attempt.gpu_energy_joules,
        "cost": attempt.cost,
    }


def job_detail(workspace: Workspace, ref: str) -> dict[str, Any]:
    """What `jobs show` answers: the job's summary, spec, attempts and state changes."""
    with workspace.store.session() as session:
        record = get_job(session, ref, workspace.project)
        attempts = [attempt_summary(a) for a in attempts_of(session, record.id)]
        events: list[dict[str, Any]] = [
            {"at": e.at, "attempt": e.attempt, "from": e.from_state, "to": e.to_state,
             "reason": e.reason}
            for e in events_of(session, record.id)
        ]  # fmt: skip
        return job_summary(record) | {"spec": record.spec, "attempts": attempts, "events": events}


def attempt_log(workspace: Workspace, ref: str, attempt: int | None = None) -> bytes:
    """The log of a job's attempt `attempt` (default: the last) as it stands: from the
    artifact store once the attempt has ended, else from its file while it runs.

    Raises:
        NotFoundError: no such job, or it has no such attempt yet.
    """
    from pathlib import Path

    with workspace.store.session() as session:
        record = get_job(session, ref, workspace.project)
        attempts = attempts_of(session, record.id)
    chosen = [a for a in attempts if attempt is None or a.number == attempt][-1:]
    if not chosen:
        raise NotFoundError(f"Job {record.id} has no attempt {attempt or ''}".rstrip() + " yet.")
    if chosen[0].log_digest:
        return workspace.artifacts.get_bytes(chosen[0].log_digest)
    if chosen[0].log_path and Path(chosen[0].log_path).exists():
        return Path(chosen[0].log_path).read_bytes()
    return b""
