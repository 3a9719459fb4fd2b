"""The scheduler service: reconcile running attempts, ask the policy, launch and preempt.

`Scheduler.cycle()` is one round: poll every attempt this executor runs (ended ones move
their job on, see `_outcome`; running ones record usage and heartbeats; timeouts and
cancel requests are carried out), then build the policy's view of the cluster and the
queues, call `forgeml.scheduler.policy.schedule`, SIGTERM the victims it names and launch
the placements. `startup()` runs once after a (re)start: attempts still alive are adopted,
the others are marked lost and requeued. `serve_forever` is `forgeml server`'s loop.

A foreground job (`forgeml jobs submit` or `forgeml train` with no server running) runs
through the same code with `only_jobs={job_id}`: it sees what every other attempt uses,
but launches, polls and preempts only its own job.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from forgeml.core.ids import new_id
from forgeml.core.store import JobAttemptRecord, JobRecord, QueueRecord
from forgeml.scheduler._outcome import Ended, apply_end, store_usage
from forgeml.scheduler._records import (
    attempt_log,
    demand_of,
    job_dir,
    job_environment,
    pending_of,
    timestamp,
)
from forgeml.scheduler.cluster import cluster_of
from forgeml.scheduler.contract import JOB_PROJECT_ENV, JOB_SCRATCH_ENV, runs_cli
from forgeml.scheduler.executors.base import (
    AttemptHandle,
    AttemptStatus,
    DemandReporter,
    Executor,
    Gang,
    LaunchRequest,
    Recovering,
)
from forgeml.scheduler.jobs import transition, utcnow
from forgeml.scheduler.model import (
    Decisions,
    JobState,
    NodeState,
    PendingJob,
    Placement,
    RunningJob,
)
from forgeml.scheduler.queues import ensure_default_queue, queue_state

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

log = logging.getLogger(__name__)
# forgeml's own jobs (domain entry points) start any workers themselves (torchrun)
LAUNCH_ONCE_KINDS = frozenset({"train", "finetune", "tune", "optimize"})
HEARTBEAT_SECONDS = 2.0


@dataclass
class CycleReport:
    """What one cycle did (for logs and tests)."""

    ended: list[tuple[str, str]] = field(default_factory=list)  # (job id, new state)
    launched: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)


class Scheduler:
    """The control loop over one executor."""

    def __init__(
        self,
        workspace: Workspace,
        executor: Executor,
        *,
        nodes: list[NodeState] | None = None,
        only_jobs: Iterable[str] | None = None,
        grace_seconds: float = 30.0,
        policy_options: Any = None,
    ) -> None:
        self.workspace = workspace
        self.executor = executor
        self.nodes = nodes if nodes is not None else cluster_of(executor, workspace.settings)
        self.only_jobs = set(only_jobs) if only_jobs is not None else None
        self.grace_seconds = grace_seconds
        self.policy_options = policy_options  # `policy.PolicyOptions`; None: its defaults
        self._stopping: dict[str, str] = {}  # attempt id -> why we asked it to stop
        self._known: dict[str, bool] = {}  # attempt ids shown to the executor (adopt)
        self._beaten: dict[str, float] = {}  # attempt id -> when its heartbeat was written
        self._demand: list[Gang] | None = None  # what the cluster was last asked for

    # ---- reconcile

    def _mine(self, job_id: str, executor: str) -> bool:
        if executor != self.executor.name:
            return False
        return self.only_jobs is None or job_id in self.only_jobs

    def _active_attempts(self) -> list[tuple[JobAttemptRecord, JobRecord]]:
        query = (
            select(JobAttemptRecord, JobRecord)
            .join(JobRecord, JobRecord.id == JobAttemptRecord.job_id)
            .where(JobAttemptRecord.ended_at.is_(None))
        )
        with self.workspace.store.session() as session:
            return [(row[0], row[1]) for row in session.execute(query)]

    def startup(self) -> None:
        """After a (re)start: adopt attempts still alive, requeue the ones that are lost."""
        for attempt, job in self._active_attempts():
            if not self._mine(job.id, attempt.executor):
                continue
            handle = AttemptHandle(attempt.executor, attempt.external_id or "")
            if not attempt.external_id:  # the last control plane died as it launched it
                handle = self._recover(attempt.id, attempt.log_path) or handle
            if handle.external_id and self.executor.adopt(handle):
                log.info("adopted attempt %s of job %s", attempt.number, job.id)
                continue
            log.warning("attempt %s of job %s was lost", attempt.number, job.id)
            self._end(attempt.id, Ended(AttemptStatus(running=False), lost=True))

    def _recover(self, attempt_id: str, log_path: str | None) -> AttemptHandle | None:
        """The handle of an attempt launched but never recorded, now recorded (and its job
        RUNNING, as `_launch` would have left it); None when it was never started."""
        if not isinstance(self.executor, Recovering) or not log_path:
            return None
        handle = self.executor.recover(Path(log_path))
        if handle is None:
            return None
        with self.workspace.store.session() as session:
            attempt = session.get(JobAttemptRecord, attempt_id)
            job = session.get(JobRecord, attempt.job_id) if attempt is not None else None
            if attempt is None or job is None or attempt.external_id:
                return None
            attempt.external_id = handle.external_id
            if job.state == JobState.SCHEDULED:
                reason = f"running on {', '.join(sorted(set(attempt.nodes)))}"
                transition(session, job, JobState.RUNNING, reason=reason, attempt=attempt.number)
        return handle

    def reconcile(self, report: CycleReport) -> None:
        """Poll every attempt of ours; carry out cancels and timeouts; end finished ones."""
        beats: list[tuple[str, AttemptStatus]] = []
        for attempt, job in self._active_attempts():
            if not self._mine(job.id, attempt.executor) or not attempt.external_id:
                continue
            handle = AttemptHandle(attempt.executor, attempt.external_id)
            self._maybe_stop(attempt, job, handle)
            status = self.executor.poll(handle)
            if status.running:
                beats.append((attempt.id, status))
                continue
            if status.reason is None and attempt.id in self._stopping:
                status = AttemptStatus(
                    False, status.exit_code, self._stopping[attempt.id], status.usage
                )
            state = self._end(attempt.id, Ended(status))
            if state is not None:
                report.ended.append((job.id, state.value))
        if beats:
            self._heartbeat(beats)

    def _maybe_stop(self, attempt: JobAttemptRecord, job: JobRecord, handle: AttemptHandle) -> None:
        if attempt.id in self._stopping:
            return
        timeout = job.spec.get("timeout_seconds")
        elapsed = time.time() - timestamp(attempt.started_at)
        if job.cancel_requested:
            self._stopping[attempt.id] = "cancelled"
        elif timeout and elapsed > float(timeout):
            self._stopping[attempt.id] = f"timed out after {float(timeout):g} s"
        else:
            return
        self.executor.terminate(handle, self.grace_seconds)

    def _heartbeat(self, beats: list[tuple[str, AttemptStatus]]) -> None:
        # at most one write per attempt every HEARTBEAT_SECONDS: the job shares the database
        clock = time.monotonic()
        beats = [
            b
            for b in beats
            if clock - self._beaten.get(b[0], -HEARTBEAT_SECONDS) >= HEARTBEAT_SECONDS
        ]
        if not beats:
            return
        self._beaten.update((attempt_id, clock) for attempt_id, _ in beats)
        now = utcnow()
        with self.workspace.store.session() as session:
            for attempt_id, status in beats:
                attempt = session.get(JobAttemptRecord, attempt_id)
                if attempt is not None and attempt.ended_at is None:
                    attempt.heartbeat_at = now
                    store_usage(attempt, status.usage, _price(self.workspace, status.usage))

    def _end(self, attempt_id: str, end: Ended) -> JobState | None:
        """Store the attempt's end, its log and its cost; move the job on (once)."""
        log_digest = self._store_log(attempt_id)
        with self.workspace.store.session() as session:
            attempt = session.get(JobAttemptRecord, attempt_id)
            if attempt is None or attempt.ended_at is not None:
                return None  # another control plane got there first
            job = session.get(JobRecord, attempt.job_id)
            assert job is not None  # a foreign key
            store_usage(attempt, end.status.usage, _price(self.workspace, end.status.usage))
            attempt.log_digest = log_digest
            state = apply_end(self.workspace, session, job, attempt, end)
        self._stopping.pop(attempt_id, None)
        _check_budgets(self.workspace)
        return state

    def _store_log(self, attempt_id: str) -> str | None:
        with self.workspace.store.session() as session:
            attempt = session.get(JobAttemptRecord, attempt_id)
            path = attempt.log_path if attempt is not None else None
        if not path or not Path(path).exists():
            return None
        return self.workspace.artifacts.put_file(path)

    # ---- schedule

    def schedule(self, report: CycleReport) -> None:
        """Ask the policy, then preempt its victims and launch its placements."""
        from forgeml.scheduler.policy import schedule as policy_schedule

        nodes, queues, pending, running, stopping = self._view()
        if not pending:
            self._report_demand([], running)
            return
        decisions: Decisions = policy_schedule(
            nodes,
            queues,
            pending,
            running,
            now=time.time(),
            stopping=stopping,
            options=self.policy_options,
        )
        for job_id in decisions.preempt:
            if self.only_jobs is None or job_id in self.only_jobs:
                self._preempt(job_id)
                report.preempted.append(job_id)
        for placement in decisions.place:
            if self._launch(placement):
                report.launched.append(placement.job_id)
        launched = set(report.launched)
        self._report_demand([job for job in pending if job.id not in launched], running)

    def _report_demand(self, waiting: list[PendingJob], running: list[RunningJob]) -> None:
        """Tell a cluster that grows on demand what the jobs need (see `DemandReporter`):
        nothing when none waits, else the running gangs and the waiting ones."""
        if not isinstance(self.executor, DemandReporter):
            return
        jobs = [(job.id, job.demand, job.workers) for job in waiting]
        if jobs:
            jobs = [(job.id, job.demand, len(job.placement)) for job in running] + jobs
        once = self._launch_once({job_id for job_id, _, _ in jobs})
        gangs = [
            Gang(job_id, (demand.times(workers),) if job_id in once else (demand,) * workers)
            for job_id, demand, workers in jobs
        ]
        if gangs == self._demand:
            return  # unchanged: the last request still stands
        try:
            self.executor.report_demand(gangs)
        except Exception:  # the cluster's autoscaler is a hint: never fail the cycle for it
            log.exception(
                "could not report the pending demand to the %s cluster", self.executor.name
            )
            return
        self._demand = gangs

    def _launch_once(self, job_ids: set[str]) -> set[str]:
        """Which of `job_ids` start their own workers (one shape holds all of them)."""
        if not job_ids:
            return set()
        query = select(JobRecord.id, JobRecord.kind).where(JobRecord.id.in_(job_ids))
        with self.workspace.store.session() as session:
            return {job_id for job_id, kind in session.execute(query) if kind in LAUNCH_ONCE_KINDS}

    def _view(
        self,
    ) -> tuple[list[NodeState], list[Any], list[PendingJob], list[RunningJob], set[str]]:
        now = time.time()
        with self.workspace.store.session() as session:
            ensure_default_queue(session, self.workspace.actor)
            queues = [queue_state(q) for q in session.scalars(select(QueueRecord))]
            waiting = session.scalars(select(JobRecord).where(JobRecord.state == "PENDING"))
            pending = [
                pending_of(job)
                for job in waiting
                if not job.cancel_requested
                and (job.next_attempt_at is None or timestamp(job.next_attempt_at) <= now)
                and (self.only_jobs is None or job.id in self.only_jobs)
            ]
        active = self._active_attempts()
        free = {node.name: node.capacity for node in self.nodes}
        running, stopping = [], set()
        for attempt, job in active:
            if (
                attempt.id not in self._known
                and attempt.external_id
                and self._shares_machine(attempt.executor)
            ):
                # the local executor learns what other processes run here (their CPUs, GPUs)
                handle = AttemptHandle(attempt.executor, attempt.external_id)
                self._known[attempt.id] = self.executor.adopt(handle)
            demand = demand_of(job)
            for node in attempt.nodes:
                if node in free:
                    free[node] = free[node] - demand
            if job.state == JobState.PREEMPTED or attempt.id in self._stopping:
                stopping.add(job.id)
            if job.state in (JobState.RUNNING, JobState.PREEMPTED):
                running.append(
                    RunningJob(
                        job.id,
                        job.queue,
                        job.priority,
                        demand,
                        tuple(attempt.nodes),
                        timestamp(attempt.started_at),
                    )
                )
        nodes = [NodeState(n.name, n.capacity, free[n.name]) for n in self.nodes]
        return nodes, queues, pending, running, stopping

    def _shares_machine(self, executor: str) -> bool:
        return executor == self.executor.name == "local"

    def _preempt(self, job_id: str) -> None:
        with self.workspace.store.session() as session:
            job = session.get(JobRecord, job_id)
            query = select(JobAttemptRecord).where(
                JobAttemptRecord.job_id == job_id, JobAttemptRecord.ended_at.is_(None)
            )
            attempt = session.scalars(query).first()
            if job is None or attempt is None or job.state != JobState.RUNNING:
                return
            transition(
                session,
                job,
                JobState.PREEMPTED,
                reason="preempted for a higher-priority job",
                attempt=attempt.number,
                workspace=self.workspace,
            )
            handle = AttemptHandle(attempt.executor, attempt.external_id or "")
        if handle.external_id:
            self.executor.terminate(handle, self.grace_seconds)

    def _launch(self, placement: Placement) -> bool:
        prepared = self._prepare(placement)
        if prepared is None:
            return False
        attempt_id, request = prepared
        try:
            handle = self.executor.launch(request)
        except Exception as error:  # any executor failure fails this attempt, not the loop
            log.exception("could not launch job %s", placement.job_id)
            status = AttemptStatus(False, None, f"could not be started: {error}")
            self._end(attempt_id, Ended(status))
            return False
        with self.workspace.store.session() as session:
            attempt = session.get(JobAttemptRecord, attempt_id)
            job = session.get(JobRecord, placement.job_id)
            assert attempt is not None and job is not None
            attempt.external_id = handle.external_id
            reason = f"running on {', '.join(sorted(set(placement.nodes)))}"
            transition(session, job, JobState.RUNNING, reason=reason, attempt=attempt.number)
        return True

    def _prepare(self, placement: Placement) -> tuple[str, LaunchRequest] | None:
        """Record the attempt and SCHEDULED in one transaction; the launch request."""
        with self.workspace.store.session() as session:
            job = session.get(JobRecord, placement.job_id)
            if job is None or job.state != JobState.PENDING or job.cancel_requested:
                return None
            job.attempts += 1
            job.executor = self.executor.name
            log_path = attempt_log(self.workspace, job.id, job.attempts)
            attempt = JobAttemptRecord(
                id=new_id(),
                job_id=job.id,
                number=job.attempts,
                state=JobState.RUNNING.value,
                executor=self.executor.name,
                nodes=list(placement.nodes),
                log_path=str(log_path),
            )
            session.add(attempt)
            transition(session, job, JobState.SCHEDULED, reason="placed", attempt=job.attempts)
            request = self._request(job, attempt.number, placement, log_path)
            return attempt.id, request

    def _request(
        self, job: JobRecord, number: int, placement: Placement, log_path: Path
    ) -> LaunchRequest:
        spec = job.spec
        folder = job_dir(self.workspace, job.id)
        folder.mkdir(parents=True, exist_ok=True)
        # forgeml's own commands derive tracking from FORGEML_HOME (`job_environment`)
        forgeml_command = job.kind in LAUNCH_ONCE_KINDS or runs_cli(spec["command"])
        env = job_environment(
            self.workspace, job.id, number, job.owner, forgeml_command=forgeml_command
        ) | dict(spec.get("env", {}))
        # the job's project, whatever its env says: it acts where it was authorized
        env[JOB_PROJECT_ENV] = job.project
        env.pop(JOB_SCRATCH_ENV, None)
        if spec.get("scratch"):
            # the folder the scheduler removes when the job ends, whatever its env says
            env[JOB_SCRATCH_ENV] = spec["scratch"]
        return LaunchRequest(
            job_id=job.id,
            attempt=number,
            command=list(spec["command"]),
            env=env,
            workers=int(spec.get("workers", 1)),
            resources=demand_of(job),
            nodes=placement.nodes,
            log_path=log_path,
            cwd=Path(env["FORGEML_JOB_CWD"]) if env.get("FORGEML_JOB_CWD") else None,
            launch_once=job.kind in LAUNCH_ONCE_KINDS,
            timeout_seconds=spec.get("timeout_seconds"),
        )

    # ---- the loop

    def cycle(self) -> CycleReport:
        """One round: reconcile, then schedule."""
        report = CycleReport()
        self.reconcile(report)
        self.schedule(report)
        return report

    def serve_forever(self, interval: float, stop: threading.Event | None = None) -> None:
        """Cycle every `interval` seconds until `stop` is set (running jobs keep running)."""
        stop = stop or threading.Event()
        self.startup()
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.cycle()
            except Exception:  # a bad cycle is logged; the loop and the jobs go on
                log.exception("scheduling cycle failed")
            stop.wait(max(0.0, interval - (time.monotonic() - started)))


def _cost_module() -> Any:
    try:
        return importlib.import_module("forgeml.scheduler.cost")
    except ImportError:  # cost metering not installed: attempts cost 0
        return None


def _price(workspace: Workspace, usage: Any) -> float:
    """The attempt's cost from the price table (0 without cost metering)."""
    cost = _cost_module()
    if cost is None:
        return 0.0
    return float(cost.price(usage, cost.load_price_table(workspace.settings)))


def _check_budgets(workspace: Workspace) -> None:
    cost = _cost_module()
    if cost is not None:
        cost.check_budgets(workspace)
