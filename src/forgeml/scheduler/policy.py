"""The scheduling policy: which pending jobs start now and which running jobs make room.

`schedule` is a pure function of the cluster, the queues and the jobs (no I/O, no clock of
its own), called once per cycle by the scheduler service and by the simulator in
`benchmarks/scheduler_sim.py`. It follows Volcano's semantics:

- Queues share the cluster by weighted Dominant Resource Fairness (`_drf.py`): the queue with
  the lowest dominant share / weight is served next, one job at a time (at equal shares, the
  queue whose next job has the higher priority), and a queue never passes its capability
  (hard cap).
- Inside a queue, higher priority first, then older (`submitted_at`), then id.
- Gang: a job's workers are placed all at once or not at all (best fit, several workers may
  share a node; `_placement.py`).
- Backfill: a job that does not fit is skipped and the jobs behind it may start. Against
  starvation, the rule is: the oldest pending job that has waited at least
  `PolicyOptions.reserve_after_s`, and that no pending job could preempt (none of higher
  priority in its queue, nor in a queue whose weighted share is not above its queue's; any
  job of a non-reclaimable queue qualifies), is offered first, before the DRF pass. If it
  is blocked by resources (not by its queue's cap) and no preemption makes room, it gets a
  reservation: nodes whose whole capacities hold it (those with the most free room for it
  first, then those whose oldest job started last) are withheld from every other job in
  the cycle. Those nodes only drain, so it starts once their jobs end; age order is stable,
  so cycle after cycle the same job holds the reservation until it starts. One reservation
  per cycle (if the oldest could not run even on the empty cluster, the next oldest, up
  to 4).
- Preemption (`_preempt.py`): a blocked job first tries the room that stopping jobs will give
  back, then victims among running jobs of strictly lower priority in reclaimable queues
  that have run at least `PolicyOptions.min_runtime_s` (queues over their fair share first,
  then the lowest priority, then the newest), only when they make it fit, and no more of
  them than needed. A victim from another queue must leave that queue's weighted share at
  or above the preemptor's queue's, so that DRF serves the preemptor's queue first once the
  room is free rather than give it back to the victim's. Their ids are returned in
  `Decisions.preempt`; the job itself is placed in a later cycle, after they stop, and the
  caller passes them as `stopping` until then so that they are not replaced twice.

`fifo_schedule` is the baseline the benchmark compares against: strict submission order
across all queues, gang placement, no backfill, no preemption.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from forgeml.scheduler._drf import QueueBook, cluster_total
from forgeml.scheduler._placement import NodeIndex
from forgeml.scheduler._preempt import Preemptor
from forgeml.scheduler.model import (
    Decisions,
    NodeState,
    PendingJob,
    Placement,
    QueueState,
    Resources,
    RunningJob,
)

__all__ = ["PolicyOptions", "fifo_schedule", "schedule"]


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Knobs of `schedule`; the defaults suit jobs that run minutes to days.

    Attributes:
        reserve_after_s: how long a job waits before it is offered first and, when blocked,
            gets nodes reserved (the anti-starvation rule of the module docstring).
        min_runtime_s: a job that started less than this ago is never a victim, so that each
            attempt runs long enough to checkpoint progress.
        max_preemption_tries: victim searches per cycle (each is O(nodes + running jobs)).
    """

    # longer than a job waits in a busy cluster that is not overloaded; short against the
    # hours a large gang could wait while small jobs keep taking every GPU that frees up.
    # `benchmarks/scheduler_sim.py --reserve-after S` (3 seeds): 2 h gives utilisation
    # 1.26/1.12/1.23x FIFO, 1 h 1.23/1.12/1.18x, 4 h 1.25/1.14/1.22x; no queue starved in any
    reserve_after_s: float = 7200.0
    min_runtime_s: float = 900.0
    max_preemption_tries: int = 16


_DEFAULTS = PolicyOptions()
# starving jobs offered first per cycle: one too big for the whole cluster gets no reservation
_RESERVATION_TRIES = 4


_Outcome = Literal["placed", "room made", "capped", "blocked"]


@dataclass(slots=True)
class _Cycle:
    """The state of one `schedule` call."""

    index: NodeIndex
    book: QueueBook
    preemptor: Preemptor
    options: PolicyOptions
    now: float
    decisions: Decisions = field(default_factory=Decisions)
    # smallest worker count that failed per per-worker demand; free room only shrinks in a cycle
    failed: dict[Resources, int] = field(default_factory=dict)
    # highest priority whose victim search failed, per (demand, workers, queue)
    failed_preemption: dict[tuple[Resources, int, str], int] = field(default_factory=dict)
    preemption_tries: int = 0

    def offer(self, job: PendingJob) -> _Outcome:
        """Place `job` if it fits, else try to make room for it by preemption."""
        amount = job.demand.times(job.workers)
        if not self.book.within_capability(job.queue, amount):
            return "capped"
        if self.failed.get(job.demand, job.workers + 1) > job.workers:
            takes = self.index.find(job.demand, job.workers)
            if takes is not None:
                self.index.commit(takes, job.demand)
                self.book.add(job.queue, amount)
                nodes = self.index.worker_nodes(takes)
                self.decisions.place.append(Placement(job.id, nodes))
                return "placed"
            self.failed[job.demand] = job.workers
        if self._preempt_for(job):
            self.book.add(job.queue, amount)
            return "room made"
        return "blocked"

    def rescue(self, starving: list[PendingJob]) -> set[str]:
        """Offer the oldest starving job first, and reserve nodes for it if it is blocked.

        A job its queue's cap holds back, or too big for the whole cluster, passes the turn to
        the next oldest (up to `_RESERVATION_TRIES`).

        Returns:
            The ids offered, which the DRF pass then skips.
        """
        offered = set()
        for job in starving[:_RESERVATION_TRIES]:
            offered.add(job.id)
            outcome = self.offer(job)
            if outcome == "capped":
                continue
            if outcome != "blocked" or self.index.reserve(job.demand, job.workers) is not None:
                break
        return offered

    def _preempt_for(self, job: PendingJob) -> bool:
        key = (job.demand, job.workers, job.queue)
        if self.preemption_tries >= self.options.max_preemption_tries:
            return False
        if not self.preemptor.may_help(job.priority):
            return False
        if self.failed_preemption.get(key, job.priority - 1) >= job.priority:
            return False
        self.preemption_tries += 1
        victims = self.preemptor.make_room(job.demand, job.workers, job.priority, job.queue)
        if victims is None:
            self.failed_preemption[key] = job.priority
            return False
        self.decisions.preempt.extend(victims)
        return True


def schedule(
    nodes: list[NodeState],
    queues: list[QueueState],
    pending: list[PendingJob],
    running: list[RunningJob],
    *,
    now: float,
    stopping: Collection[str] = frozenset(),
    options: PolicyOptions | None = None,
) -> Decisions:
    """One scheduling cycle with forgeml's policy (see the module docstring).

    Args:
        nodes: every node with its capacity and what is free now (the inputs are not modified).
        queues: the queues; a queue a job names but this list lacks gets weight 1, no cap,
            reclaimable.
        pending: the jobs waiting to start.
        running: the jobs holding resources, including those being stopped.
        now: the current time, on the clock of `submitted_at` and `started_at`.
        stopping: ids of running jobs already told to stop (earlier preemptions): their room
            counts as coming free, and they are not chosen as victims again.
        options: the policy's knobs.

    Returns:
        The jobs to start now with one node per worker, and the running jobs to preempt.
    """
    options = options or _DEFAULTS
    index = NodeIndex(nodes, running)
    book = QueueBook(queues, cluster_total(index.capacity), running, pending)
    preemptor = Preemptor(index, book, running, stopping, now - options.min_runtime_s)
    cycle = _Cycle(index, book, preemptor, options, now)
    offered = cycle.rescue(_starving(pending, book, now - options.reserve_after_s))
    by_queue: dict[str, list[PendingJob]] = defaultdict(list)
    for job in pending:
        if job.id not in offered:
            by_queue[job.queue].append(job)
    turns: list[tuple[float, int, str, int]] = []  # share, -next job's priority, queue, next
    for name, jobs in by_queue.items():
        jobs.sort(key=lambda job: (-job.priority, job.submitted_at, job.id))
        turns.append((book.weighted_share(name), -jobs[0].priority, name, 0))
    heapq.heapify(turns)
    while turns:
        _, _, name, position = heapq.heappop(turns)
        jobs = by_queue[name]
        cycle.offer(jobs[position])
        position += 1
        if position < len(jobs):
            turn = (book.weighted_share(name), -jobs[position].priority, name, position)
            heapq.heappush(turns, turn)
    return cycle.decisions


def _starving(pending: list[PendingJob], book: QueueBook, deadline: float) -> list[PendingJob]:
    """The oldest jobs submitted before `deadline` that no pending job could preempt.

    Were a pending job able to preempt the one offered first, it would take the room back
    next cycle, and the offered job would be requeued and offered first again: a loop.
    """
    top: dict[str, int] = {}
    for job in pending:
        top[job.queue] = max(top.get(job.queue, job.priority), job.priority)

    def safe(job: PendingJob) -> bool:
        if not book.reclaimable(job.queue):
            return True
        share = book.weighted_share(job.queue)
        return all(
            priority <= job.priority or (queue != job.queue and book.weighted_share(queue) > share)
            for queue, priority in top.items()
        )

    return heapq.nsmallest(
        _RESERVATION_TRIES,
        (job for job in pending if job.submitted_at <= deadline and safe(job)),
        key=lambda job: (job.submitted_at, job.id),
    )


def fifo_schedule(
    nodes: list[NodeState],
    queues: list[QueueState],
    pending: list[PendingJob],
    running: list[RunningJob],
    *,
    now: float,
) -> Decisions:
    """The baseline: strict submission order over all queues, gangs, no backfill or preemption.

    Queue weights and priorities are ignored; capabilities are still hard caps. The first job
    that does not fit (or would pass its queue's cap) stops the cycle.

    Args:
        nodes: every node with its capacity and what is free now.
        queues: the queues (only their capabilities matter here).
        pending: the jobs waiting to start.
        running: the jobs holding resources.
        now: the current time (unused: FIFO has no clock-based rule).

    Returns:
        The jobs to start now; never any preemption.
    """
    del now
    index = NodeIndex(nodes)
    book = QueueBook(queues, cluster_total(index.capacity), running, pending)
    decisions = Decisions()
    for job in sorted(pending, key=lambda job: (job.submitted_at, job.id)):
        amount = job.demand.times(job.workers)
        takes = index.find(job.demand, job.workers)
        if takes is None or not book.within_capability(job.queue, amount):
            break
        index.commit(takes, job.demand)
        book.add(job.queue, amount)
        decisions.place.append(Placement(job.id, index.worker_nodes(takes)))
    return decisions
