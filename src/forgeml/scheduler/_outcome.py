"""How an ended attempt moves its job on: success, cancel, requeue after preemption, retry, fail.

Kept apart from the service loop so the rules read in one place:

- exit 0: SUCCEEDED (even when a preemption or cancel was on its way);
- a cancel was requested: CANCELLED;
- the scheduler preempted it, or it exited with `PREEMPTED_EXIT_CODE` / SIGTERM on its own
  (a node drain): PREEMPTED -> PENDING, not counted as a failure;
- the control plane lost it: LOST -> PENDING (not the job's fault, not counted);
- otherwise FAILED: PENDING again after `backoff_seconds x 2^(failures-1)` while failures
  <= max_retries, else FAILED with the job's own error sentence (from its result file,
  `contract.py`) or the exit reason, then the tail of the log for a person to read.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from forgeml.core.store import JobAttemptRecord, JobRecord
from forgeml.scheduler._records import job_dir
from forgeml.scheduler.contract import PREEMPTED_EXIT_CODE, read_result, result_path
from forgeml.scheduler.executors.base import AttemptStatus, AttemptUsage
from forgeml.scheduler.jobs import failed_attempts, transition, utcnow
from forgeml.scheduler.model import JobState

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

LOST_REASON = "the control plane lost the attempt"
TAIL_LINES = 20


@dataclass(frozen=True)
class Ended:
    """An attempt's end as the executor (or the service) saw it."""

    status: AttemptStatus
    lost: bool = False


def log_tail(path: str | None, lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a log file ('' when there is none)."""
    if not path or not Path(path).exists():
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 64 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def describe_exit(status: AttemptStatus) -> str:
    """One phrase for how an attempt ended."""
    if status.reason:
        return status.reason
    code = status.exit_code
    if code is None:
        return "ended without an exit code"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def store_usage(attempt: JobAttemptRecord, usage: AttemptUsage, cost: float) -> None:
    attempt.cpu_seconds = usage.cpu_seconds
    attempt.gpu_seconds = usage.gpu_seconds
    attempt.memory_gb_seconds = usage.memory_gb_seconds
    attempt.peak_memory_gb = usage.peak_memory_gb
    attempt.wall_seconds = usage.wall_seconds
    attempt.gpu_utilization = usage.gpu_utilization
    attempt.gpu_peak_memory_bytes = usage.gpu_peak_memory_bytes
    attempt.gpu_energy_joules = usage.gpu_energy_joules
    attempt.cost = cost


def _was_preempted(job: JobRecord, status: AttemptStatus) -> bool:
    if job.state == JobState.PREEMPTED:
        return True
    stopped = status.exit_code in (PREEMPTED_EXIT_CODE, -signal.SIGTERM)
    return status.reason is None and stopped


def apply_end(
    workspace: Workspace, session: Session, job: JobRecord, attempt: JobAttemptRecord, end: Ended
) -> JobState:
    """Record the attempt's end and move the job on; returns the job's new state."""
    status, number = end.status, attempt.number
    attempt.ended_at = utcnow()
    attempt.exit_code = status.exit_code
    attempt.reason = status.reason if not end.lost else LOST_REASON
    if status.exit_code == 0 and not end.lost:
        attempt.state = JobState.SUCCEEDED.value
        _to(session, job, JobState.SUCCEEDED, "succeeded", number)
    elif job.cancel_requested:
        attempt.state = JobState.CANCELLED.value
        _to(session, job, JobState.CANCELLED, "cancelled", number)  # audited at the request
    elif end.lost:
        attempt.state = "LOST"
        _to(session, job, JobState.PENDING, f"attempt {number}: {LOST_REASON}; requeued", number)
    elif _was_preempted(job, status):
        attempt.state = JobState.PREEMPTED.value
        attempt.reason = attempt.reason or "preempted"
        if job.state != JobState.PREEMPTED:
            _to(session, job, JobState.PREEMPTED, "stopped by SIGTERM", number, workspace)
        _to(session, job, JobState.PENDING, "requeued after preemption", number)
    else:
        attempt.state = JobState.FAILED.value
        attempt.reason = describe_exit(status)
        session.flush()
        _fail_or_retry(workspace, session, job, attempt)
    return JobState(job.state)


def _own_error(workspace: Workspace, job: JobRecord, number: int) -> str | None:
    """The sentence a forgeml job put in its result file (the contract), if any."""
    result = read_result(result_path(job_dir(workspace, job.id), number))
    return result.error if result is not None else None


def _fail_or_retry(
    workspace: Workspace, session: Session, job: JobRecord, attempt: JobAttemptRecord
) -> None:
    failures = failed_attempts(session, job.id)
    max_retries = int(job.spec.get("max_retries", 0))
    what = f"attempt {attempt.number} {attempt.reason}"
    if failures <= max_retries:
        delay = float(job.spec.get("backoff_seconds", 5.0)) * 2 ** (failures - 1)
        job.next_attempt_at = utcnow() + timedelta(seconds=delay)
        reason = f"{what}; retry {failures} of {max_retries} in {delay:g} s"
        _to(session, job, JobState.PENDING, reason, attempt.number)
        return
    tail = log_tail(attempt.log_path)
    own = _own_error(workspace, job, attempt.number)
    job.error = (own or f"The job failed: {what}.") + (
        f"\n--- last lines of its log ---\n{tail}" if tail else ""
    )
    _to(session, job, JobState.FAILED, what, attempt.number)


def _to(
    session: Session,
    job: JobRecord,
    state: JobState,
    reason: str,
    attempt: int,
    workspace: Workspace | None = None,
) -> None:
    transition(session, job, state, reason=reason, attempt=attempt, workspace=workspace)
