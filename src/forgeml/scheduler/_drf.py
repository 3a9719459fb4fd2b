"""Queue shares by Dominant Resource Fairness, with Volcano's queue weights and capabilities.

A queue's dominant share is the largest fraction of the cluster's CPUs, GPUs or memory that
its jobs hold (Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple
Resource Types", NSDI 2011); dividing by the queue's weight gives weighted DRF, and the
queue with the lowest weighted share is served first. Its entitled (fair) share is its weight
over the weights of the queues that have jobs, the "deserved" share of Volcano's
proportion plugin.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from forgeml.scheduler.model import PendingJob, QueueState, Resources, RunningJob

EMPTY = Resources()


class QueueBook:
    """What each queue holds during one scheduling cycle, and its share of the cluster."""

    def __init__(
        self,
        queues: Sequence[QueueState],
        total: Resources,
        running: Iterable[RunningJob],
        pending: Iterable[PendingJob],
    ) -> None:
        self.queues = {queue.name: queue for queue in queues}
        self.total = total
        self.usage: dict[str, Resources] = {}
        active: set[str] = set()
        for job in running:
            self.add(job.queue, job.demand.times(len(job.placement)))
            active.add(job.queue)
        active.update(job.queue for job in pending)
        for name in active:
            # a queue the caller did not describe gets Volcano's defaults
            self.queues.setdefault(name, QueueState(name, 1, None, reclaimable=True))
        weights = sum(self.queues[name].weight for name in active)
        self.entitled = {name: self.queues[name].weight / max(weights, 1) for name in active}

    def add(self, queue: str, amount: Resources) -> None:
        """Count `amount` as held by `queue`."""
        self.usage[queue] = self.usage.get(queue, EMPTY) + amount

    def remove(self, queue: str, amount: Resources) -> None:
        """Stop counting `amount` as held by `queue`."""
        self.usage[queue] = self.usage.get(queue, EMPTY) - amount

    def dominant_share(self, queue: str, change: Resources = EMPTY) -> float:
        """The largest fraction of any one cluster resource that `queue` holds (+ `change`)."""
        used, total = self.usage.get(queue, EMPTY) + change, self.total
        shares = [0.0]
        if total.cpus > 0:
            shares.append(used.cpus / total.cpus)
        if total.gpus > 0:
            shares.append(used.gpus / total.gpus)
        if total.memory_gb > 0:
            shares.append(used.memory_gb / total.memory_gb)
        return max(shares)

    def weighted_share(self, queue: str, change: Resources = EMPTY) -> float:
        """The dominant share over the queue's weight: the lowest is served first."""
        return self.dominant_share(queue, change) / max(self.queues[queue].weight, 1)

    def over_fair_share(self, queue: str) -> bool:
        """True when `queue` holds more than its weight entitles it to."""
        return self.dominant_share(queue) > self.entitled.get(queue, 0.0) + 1e-9

    def within_capability(self, queue: str, amount: Resources) -> bool:
        """True when `queue` may take `amount` more without passing its hard cap."""
        capability = self.queues[queue].capability
        if capability is None:
            return True
        return (self.usage.get(queue, EMPTY) + amount).fits_in(capability)

    def reclaimable(self, queue: str) -> bool:
        """Whether other jobs may preempt this queue's jobs."""
        return self.queues[queue].reclaimable


def cluster_total(capacities: Iterable[Resources]) -> Resources:
    """The sum of the nodes' capacities."""
    total = EMPTY
    for capacity in capacities:
        total = total + capacity
    return total
