"""Free resources per node, indexed by free GPUs, and gang placement on them.

A job's workers are identical, so a gang fits exactly when the nodes' worker slots add up to
its worker count, where a node's slots are how many workers its free CPUs, GPUs and memory
each hold (several workers may share a node). Nodes sit in buckets by free GPUs, so a worker
that needs `g` GPUs only looks at buckets `g` and up, smallest first: best fit, which keeps
whole nodes free for the large gangs that need them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from forgeml.scheduler.model import NodeState, Resources, RunningJob

EPS = 1e-9
# What a node takes is a list of (node position, workers placed there).
Takes = list[tuple[int, int]]


def slots(cpus: float, gpus: float, memory: float, demand: Resources, limit: int) -> int:
    """How many workers of `demand` fit in (cpus, gpus, memory), at most `limit`."""
    count = limit
    if demand.gpus > 0:
        count = min(count, int(gpus // demand.gpus))
    if demand.cpus > 0:
        count = min(count, int((cpus + EPS) / demand.cpus))
    if demand.memory_gb > 0:
        count = min(count, int((memory + EPS) / demand.memory_gb))
    return max(count, 0)


class NodeIndex:
    """A mutable copy of the nodes' free resources for one scheduling cycle.

    The caller's `NodeState`s are never modified. Nodes taken out by `reserve` are invisible
    to `find` for the rest of the cycle.
    """

    def __init__(self, nodes: Sequence[NodeState], running: Iterable[RunningJob] = ()) -> None:
        self.names = [node.name for node in nodes]
        self.position = {name: index for index, name in enumerate(self.names)}
        # when the oldest job on each node started (an empty node: never)
        self.busy_since = [math.inf] * len(nodes)
        for job in running:
            for name in job.placement:
                index = self.position.get(name)
                if index is not None:
                    self.busy_since[index] = min(self.busy_since[index], job.started_at)
        self.capacity = [node.capacity for node in nodes]
        self.cpus = [node.free.cpus for node in nodes]
        self.gpus = [max(node.free.gpus, 0) for node in nodes]
        self.memory = [node.free.memory_gb for node in nodes]
        top = max([node.capacity.gpus for node in nodes] + self.gpus + [0])
        self.buckets: list[dict[int, None]] = [{} for _ in range(top + 1)]
        for index, gpus in enumerate(self.gpus):
            self.buckets[gpus][index] = None
        self.reserved: set[int] = set()
        # nodes found with no room for a demand: free room only shrinks, so they stay so
        self._full: dict[Resources, set[int]] = {}
        self.total_cpus = sum(max(cpus, 0.0) for cpus in self.cpus)
        self.total_memory = sum(max(memory, 0.0) for memory in self.memory)

    def free_slots(self, index: int, demand: Resources, limit: int) -> int:
        """Workers of `demand` that node `index` can take now."""
        return slots(self.cpus[index], self.gpus[index], self.memory[index], demand, limit)

    def _may_fit(self, demand: Resources, workers: int) -> bool:
        """A cheap necessary condition: enough GPU slots and enough CPUs and memory in all."""
        if demand.cpus * workers > self.total_cpus + EPS:
            return False
        if demand.memory_gb * workers > self.total_memory + EPS:
            return False
        if demand.gpus <= 0:
            return True
        gpu_slots = 0
        for free in range(demand.gpus, len(self.buckets)):
            gpu_slots += len(self.buckets[free]) * (free // demand.gpus)
            if gpu_slots >= workers:
                return True
        return False

    def find(self, demand: Resources, workers: int) -> Takes | None:
        """Where `workers` workers of `demand` would go (best fit), or None when they do not fit.

        Nothing changes until `commit`: a gang is placed whole or not at all.
        """
        if not self._may_fit(demand, workers):
            return None
        full = self._full.setdefault(demand, set())
        takes: Takes = []
        left = workers
        for free in range(min(demand.gpus, len(self.buckets)), len(self.buckets)):
            for index in self.buckets[free]:
                if index in full:
                    continue
                count = self.free_slots(index, demand, left)
                if count == 0:
                    full.add(index)
                    continue
                takes.append((index, count))
                left -= count
                if left == 0:
                    return takes
        return None

    def commit(self, takes: Iterable[tuple[int, int]], demand: Resources) -> None:
        """Subtract `demand` once per worker placed by `takes`."""
        for index, count in takes:
            used = demand.times(count)
            self.consume(index, used.cpus, used.gpus, used.memory_gb)

    def consume(self, index: int, cpus: float, gpus: int, memory: float) -> None:
        """Take (cpus, gpus, memory) off node `index`'s free resources."""
        old = self.gpus[index]
        self.cpus[index] -= cpus
        self.gpus[index] = max(old - gpus, 0)
        self.memory[index] -= memory
        if index not in self.reserved:
            self.total_cpus -= cpus
            self.total_memory -= memory
            if self.gpus[index] != old:
                del self.buckets[old][index]
                self.buckets[self.gpus[index]][index] = None

    def reserve(self, demand: Resources, workers: int) -> list[int] | None:
        """Set aside the nodes a blocked gang will start on once their jobs end.

        Picks nodes until their whole capacities hold the gang, those with the most free
        slots for it first, then those whose oldest job started last: run times are heavy
        tailed, so a job that has run long is likely to run long still and the node it holds
        to drain last. The picked nodes are hidden from `find` for the rest of the cycle.

        Returns:
            The reserved node positions, or None (nothing reserved) when even the empty
            capacities of all visible nodes cannot hold the gang.
        """
        candidates = [
            index
            for index in range(len(self.names))
            if index not in self.reserved and self._capacity_slots(index, demand, 1)
        ]
        candidates.sort(key=lambda i: (-self.free_slots(i, demand, workers), -self.busy_since[i]))
        chosen: list[int] = []
        left = workers
        for index in candidates:
            chosen.append(index)
            left -= self._capacity_slots(index, demand, left)
            if left <= 0:
                break
        if left > 0:
            return None
        for index in chosen:
            self._hide(index)
        return chosen

    def _capacity_slots(self, index: int, demand: Resources, limit: int) -> int:
        capacity = self.capacity[index]
        return slots(capacity.cpus, capacity.gpus, capacity.memory_gb, demand, limit)

    def _hide(self, index: int) -> None:
        del self.buckets[self.gpus[index]][index]
        self.reserved.add(index)
        self.total_cpus -= max(self.cpus[index], 0.0)
        self.total_memory -= max(self.memory[index], 0.0)

    def worker_nodes(self, takes: Iterable[tuple[int, int]]) -> tuple[str, ...]:
        """One node name per worker, in rank order, for `takes`."""
        return tuple(self.names[index] for index, count in takes for _ in range(count))
