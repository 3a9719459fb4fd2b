from __future__ import annotations

import pytest
from sqlalchemy import select

from forgeml.core.audit import verify
from forgeml.core.errors import (
    AlreadyExistsError,
    InvalidJobError,
    JobStateError,
    NotFoundError,
    UsageError,
)
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.scheduler.jobs import cancel, events_of, find_job, list_jobs, retry
from forgeml.scheduler.model import JobState
from forgeml.scheduler.queues import create_queue, list_queues, parse_queue, show_queue
from tests.scheduler.conftest import job_spec, submit_local


def test_default_queue_exists_from_first_use(sched_workspace: Workspace) -> None:
    queues = list_queues(sched_workspace)
    assert [(q.name, q.weight, q.reclaimable) for q in queues] == [("default", 1, True)]


def test_create_queue_is_audited_and_shown(any_workspace: Workspace) -> None:
    spec = parse_queue({"name": "research", "weight": 3, "capability": {"gpus": 2}})
    create_queue(any_workspace, spec)
    queue = show_queue(any_workspace, "research")
    assert (queue.weight, queue.capability, queue.reclaimable) == (3, {"gpus": 2}, True)
    with any_workspace.store.session() as session:
        actions = [e.action for e in session.scalars(select(AuditEvent))]
        assert actions == ["queue.create"]
        verify(session)
    with pytest.raises(AlreadyExistsError, match="already exists"):
        create_queue(any_workspace, spec)


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"name": "q", "weight": 0}, "Invalid queue weight"), ({"name": "q", "budget": -1}, "budget")],
)
def test_bad_queue_fields_are_one_sentence(fields: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_queue(fields)


def test_submit_records_pending_with_an_event_and_audit(any_workspace: Workspace) -> None:
    job_id = submit_local(any_workspace, job_spec(["true"]))
    job = find_job(any_workspace, job_id)
    assert job.state == JobState.PENDING and job.queue == "default" and job.priority == 100
    assert find_job(any_workspace, job_id[:8]).id == job_id
    assert find_job(any_workspace, "t").id == job_id
    with any_workspace.store.session() as session:
        events = events_of(session, job_id)
        assert [(e.from_state, e.to_state) for e in events] == [(None, "PENDING")]
        assert [e.action for e in session.scalars(select(AuditEvent))] == ["job.submit"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"resources": {"gpus": 1}}, "one worker needs 1 CPUs, 1 GPUs"),
        ({"resources": {"cpus": 3}}, "the largest node has 2 CPUs"),
        ({"resources": {"cpus": 1}, "workers": 3}, "3 workers need 3 CPUs"),
        ({"resources": {"memory_gb": 5}}, "can never run"),
    ],
)
def test_impossible_requests_are_rejected_at_submit(
    sched_workspace: Workspace, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidJobError, match=message):
        submit_local(sched_workspace, job_spec(["true"], **fields))
    assert list_jobs(sched_workspace) == []


def test_negative_memory_is_one_sentence() -> None:
    with pytest.raises(InvalidJobError, match=r"Invalid job resources\.memory_gb: input should be"):
        job_spec(["true"], resources={"memory_gb": -1})


def test_unknown_priority_class_is_refused() -> None:
    with pytest.raises(InvalidJobError, match="Unknown priority class 'urgent'"):
        job_spec(["true"], priority="urgent")


def test_unknown_queue_is_not_found(sched_workspace: Workspace) -> None:
    with pytest.raises(NotFoundError, match="No queue named 'nope'"):
        submit_local(sched_workspace, job_spec(["true"], queue="nope"))


def test_over_the_queue_capability_is_rejected(sched_workspace: Workspace) -> None:
    create_queue(sched_workspace, parse_queue({"name": "small", "capability": {"cpus": 1}}))
    with pytest.raises(InvalidJobError, match="over the queue's capability"):
        submit_local(sched_workspace, job_spec(["true"], queue="small", resources={"cpus": 2}))


def test_cancel_pending_then_retry(any_workspace: Workspace) -> None:
    job_id = submit_local(any_workspace, job_spec(["true"]))
    assert cancel(any_workspace, job_id).state == JobState.CANCELLED
    with pytest.raises(JobStateError, match="already ended CANCELLED"):
        cancel(any_workspace, job_id)
    assert retry(any_workspace, job_id).state == JobState.PENDING
    with pytest.raises(JobStateError, match="only FAILED or CANCELLED"):
        retry(any_workspace, job_id)
    with any_workspace.store.session() as session:
        states = [(e.from_state, e.to_state) for e in events_of(session, job_id)]
        assert states == [(None, "PENDING"), ("PENDING", "CANCELLED"), ("CANCELLED", "PENDING")]
        actions = [e.action for e in session.scalars(select(AuditEvent).order_by(AuditEvent.seq))]
        assert actions == ["job.submit", "job.cancel", "job.retry"]
        verify(session)


def test_unknown_job_is_not_found(sched_workspace: Workspace) -> None:
    with pytest.raises(NotFoundError, match="No job 'ghost'"):
        find_job(sched_workspace, "ghost")
