"""Prometheus metrics of the scheduler and its jobs, read from the store at each scrape.

`forgeml server --metrics-port PORT` serves them; nothing is kept in memory between
scrapes, so a restarted server exports the same values and two servers on one store agree.

| metric | type | labels |
|---|---|---|
| `forgeml_scheduler_jobs` | gauge (jobs in each state) | queue, state |
| `forgeml_scheduler_oldest_pending_seconds` | gauge (longest wait of a pending job) | queue |
| `forgeml_queue_cost_total` | counter (cost of every attempt of the queue's jobs) | queue |
| `forgeml_queue_budget` | gauge (queues with a budget only) | queue |
| `forgeml_job_cpu_seconds_total` | counter (running jobs, all attempts) | job, queue, kind |
| `forgeml_job_peak_memory_bytes` | gauge (running jobs, the current attempt) | job, queue, kind |
| `forgeml_job_gpu_seconds_total` | counter (running jobs, all attempts) | job, queue, kind |
| `forgeml_job_gpu_utilization_ratio` | gauge (running jobs, current attempt) | job, queue, kind |
| `forgeml_job_gpu_peak_memory_bytes` | gauge (running jobs, current attempt) | job, queue, kind |
| `forgeml_job_gpu_energy_joules_total` | counter (running jobs, all attempts) | job, queue, kind |
| `forgeml_gpu_utilization_ratio` | gauge (0-1, each GPU NVML sees; absent without GPUs) | gpu |
| `forgeml_gpu_power_watts` | gauge (each GPU's draw; absent where NVML cannot read it) | gpu |

A job's GPU seconds are the seconds each GPU it held was busy, summed: their rate is the
job's GPU utilisation (in GPUs). A queue with no pending job has no oldest-wait series,
and a machine without GPUs no GPU series (per GPU or per job): absent, not zero. A job's
utilisation, peak GPU memory and energy are NVML's readings of the GPUs it held, as its
cost record keeps them (`forgeml.scheduler._usage`); a job that held none has none. Per-job
series exist for running jobs only, so their number is bounded by the cluster's size, not
by the job history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forgeml.core.nvml import nvml_module, read_gpu_sample
from forgeml.core.store import JobAttemptRecord, JobRecord, QueueRecord, Store
from forgeml.scheduler.jobs import utcnow
from forgeml.scheduler.model import JobState

_GIB = 1024**3
_Family = GaugeMetricFamily | CounterMetricFamily


def _families() -> dict[str, _Family]:
    """Every family this collector exports, empty: what `describe` lists."""
    return {
        "jobs": GaugeMetricFamily(
            "forgeml_scheduler_jobs", "Jobs in each state, by queue.", labels=["queue", "state"]
        ),
        "oldest": GaugeMetricFamily(
            "forgeml_scheduler_oldest_pending_seconds",
            "Seconds the longest-waiting pending job of the queue has waited.",
            labels=["queue"],
        ),
        "cost": CounterMetricFamily(
            "forgeml_queue_cost", "Cost of every attempt of the queue's jobs.", labels=["queue"]
        ),
        "budget": GaugeMetricFamily(
            "forgeml_queue_budget", "The queue's budget (queues with one).", labels=["queue"]
        ),
        "cpu": CounterMetricFamily(
            "forgeml_job_cpu_seconds",
            "CPU seconds a running job has used, over every attempt.",
            labels=["job", "queue", "kind"],
        ),
        "memory": GaugeMetricFamily(
            "forgeml_job_peak_memory_bytes",
            "Peak resident memory of a running job's current attempt.",
            labels=["job", "queue", "kind"],
        ),
        "gpu_seconds": CounterMetricFamily(
            "forgeml_job_gpu_seconds",
            "GPU seconds a running job has kept busy (NVML), over every attempt; its rate is "
            "the job's GPU utilisation. Absent without GPUs.",
            labels=["job", "queue", "kind"],
        ),
        "gpu_busy": GaugeMetricFamily(
            "forgeml_job_gpu_utilization_ratio",
            "Mean utilisation (0-1 per GPU) of the GPUs a running job's current attempt "
            "holds (NVML); absent for a job without GPUs.",
            labels=["job", "queue", "kind"],
        ),
        "gpu_memory": GaugeMetricFamily(
            "forgeml_job_gpu_peak_memory_bytes",
            "Peak GPU memory in use on the GPUs a running job's current attempt holds (NVML).",
            labels=["job", "queue", "kind"],
        ),
        "gpu_energy": CounterMetricFamily(
            "forgeml_job_gpu_energy_joules",
            "Energy the GPUs a running job held drew (NVML power integrated), over every "
            "attempt; absent for a job without GPUs.",
            labels=["job", "queue", "kind"],
        ),
        "power": GaugeMetricFamily(
            "forgeml_gpu_power_watts",
            "A GPU's power draw (NVML); absent without GPUs or where the board reports none.",
            labels=["gpu"],
        ),
        "gpu": GaugeMetricFamily(
            "forgeml_gpu_utilization_ratio",
            "Share of the last sample period a GPU was busy (NVML); absent without GPUs.",
            labels=["gpu"],
        ),
    }


class SchedulerCollector(Collector):
    """The store's view of queues and jobs as Prometheus metrics, computed per scrape."""

    def __init__(self, store: Store, clock: Callable[[], datetime] = utcnow) -> None:
        self._store = store
        self._clock = clock

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        with self._store.session() as session:
            self._queues(session, families)
            self._running(session, families)
        for index, busy, watts in gpu_readings():
            families["gpu"].add_metric([str(index)], busy)
            if watts is not None:
                families["power"].add_metric([str(index)], watts)
        yield from families.values()

    def _queues(self, session: Session, families: dict[str, _Family]) -> None:
        counts = session.execute(
            select(JobRecord.queue, JobRecord.state, func.count()).group_by(
                JobRecord.queue, JobRecord.state
            )
        ).all()
        for queue, state, count in counts:
            families["jobs"].add_metric([queue, state], float(count))
        oldest = session.execute(
            select(JobRecord.queue, func.min(JobRecord.submitted_at))
            .where(JobRecord.state == JobState.PENDING)
            .group_by(JobRecord.queue)
        ).all()
        now = self._clock()
        for queue, submitted in oldest:
            waited = (now - _aware(submitted)).total_seconds()
            families["oldest"].add_metric([queue], max(waited, 0.0))
        spend = session.execute(
            select(JobRecord.queue, func.coalesce(func.sum(JobAttemptRecord.cost), 0.0))
            .join(JobAttemptRecord, JobAttemptRecord.job_id == JobRecord.id)
            .group_by(JobRecord.queue)
        ).all()
        for queue, cost in spend:
            families["cost"].add_metric([queue], float(cost))
        budgets = session.execute(select(QueueRecord.name, QueueRecord.budget)).all()
        for name, budget in budgets:
            if budget is not None:
                families["budget"].add_metric([name], float(budget))

    def _running(self, session: Session, families: dict[str, _Family]) -> None:
        running = session.execute(
            select(JobRecord.id, JobRecord.queue, JobRecord.kind, JobRecord.attempts).where(
                JobRecord.state == JobState.RUNNING
            )
        ).all()
        if not running:
            return
        ids = [job_id for job_id, *_ in running]
        attempts = session.execute(
            select(
                JobAttemptRecord.job_id,
                JobAttemptRecord.number,
                JobAttemptRecord.cpu_seconds,
                JobAttemptRecord.gpu_seconds,
                JobAttemptRecord.peak_memory_gb,
            ).where(JobAttemptRecord.job_id.in_(ids))
        ).all()
        self._running_gpus(session, families, running)
        cpu: dict[str, float] = {}
        gpu: dict[str, float] = {}
        memory: dict[tuple[str, int], float] = {}
        for job_id, number, cpu_seconds, gpu_seconds, peak_gb in attempts:
            cpu[job_id] = cpu.get(job_id, 0.0) + float(cpu_seconds)
            gpu[job_id] = gpu.get(job_id, 0.0) + float(gpu_seconds or 0.0)
            memory[(job_id, number)] = float(peak_gb) * _GIB
        # GPU seconds come from NVML: where none is (or no job has had a GPU) they are
        # absent, not a zero that would read as an idle GPU
        metered = nvml_module() is not None or any(gpu.values())
        for job_id, queue, kind, current in running:
            labels = [job_id, queue, kind]
            families["cpu"].add_metric(labels, cpu.get(job_id, 0.0))
            families["memory"].add_metric(labels, memory.get((job_id, current), 0.0))
            if metered:
                families["gpu_seconds"].add_metric(labels, gpu.get(job_id, 0.0))

    def _running_gpus(
        self, session: Session, families: dict[str, _Family], running: Sequence[Any]
    ) -> None:
        """Each running job's NVML figures, where its attempts recorded any."""
        attempt = JobAttemptRecord
        rows = session.execute(
            select(
                attempt.job_id,
                attempt.number,
                attempt.gpu_utilization,
                attempt.gpu_peak_memory_bytes,
                attempt.gpu_energy_joules,
            ).where(attempt.job_id.in_([job_id for job_id, *_ in running]))
        ).all()
        current = {(job_id, number): (busy, peak) for job_id, number, busy, peak, _ in rows}
        energy: dict[str, float] = {}
        for job_id, _, _, _, joules in rows:
            if joules is not None:
                energy[job_id] = energy.get(job_id, 0.0) + float(joules)
        for job_id, queue, kind, number in running:
            labels = [job_id, queue, kind]
            busy, peak = current.get((job_id, number), (None, None))
            if busy is not None:
                families["gpu_busy"].add_metric(labels, float(busy))
            if peak is not None:
                families["gpu_memory"].add_metric(labels, float(peak))
            if job_id in energy:
                families["gpu_energy"].add_metric(labels, energy[job_id])


def gpu_readings() -> list[tuple[int, float, float | None]]:
    """(NVML index, busy share 0-1, power watts or None) of each GPU NVML sees; empty
    without NVML or GPUs."""
    nvml = nvml_module()
    if nvml is None:
        return []
    readings = []
    try:
        for index in range(nvml.nvmlDeviceGetCount()):
            sample = read_gpu_sample(nvml, nvml.nvmlDeviceGetHandleByIndex(index), 0.0)
            if sample is not None:
                readings.append((index, sample.utilization, sample.power_watts))
    except nvml.NVMLError:
        return []
    return readings


def _aware(moment: datetime) -> datetime:
    """SQLite returns naive datetimes for the UTC values the store writes."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def scheduler_registry(store: Store, clock: Callable[[], datetime] = utcnow) -> CollectorRegistry:
    """A registry holding the scheduler's collector alone (what `forgeml server` serves)."""
    registry = CollectorRegistry()
    registry.register(SchedulerCollector(store, clock))
    return registry
