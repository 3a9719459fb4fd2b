"""Choosing preemption victims: the fewest, least important running jobs that make room.

Room that running jobs will give back when they stop (those already told to stop, and the
victims chosen in this cycle) is tracked per node as `release`. A blocked job first looks at
free + release; only if that is not enough does it add victims: running jobs of strictly
lower priority in reclaimable queues, in this order of preference: jobs of queues over their
fair share, then the lowest priority, then the newest. A victim from another queue is taken
only while that queue's weighted share, without it, stays at or above the preemptor's
queue's: otherwise the next cycle would serve the victim's queue first, hand it the freed
room back, and preempt again (Volcano's reclaim rule, in DRF terms; at equal shares the
queue whose next job ranks higher is served first). Once it fits,
victims are dropped again, last chosen first, while it still fits, so no more are stopped than
needed. The job then claims its room (release first, then free resources) so that nothing else
in the cycle takes it; it is placed in a later cycle, once its victims have stopped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable

from forgeml.scheduler._drf import EMPTY, QueueBook
from forgeml.scheduler._placement import NodeIndex, Takes, slots
from forgeml.scheduler.model import Resources, RunningJob

Amount = list[float]  # [cpus, gpus, memory_gb] on one node


class Preemptor:
    """Victim selection for one scheduling cycle over `index` (whose free room it claims).

    Only jobs started at or before `started_before` may be victims: a job requeued after a
    preemption would otherwise be the newest, so the first victim again, and never progress.
    """

    def __init__(
        self,
        index: NodeIndex,
        book: QueueBook,
        running: Iterable[RunningJob],
        stopping: Collection[str],
        started_before: float,
    ) -> None:
        self.index = index
        self.book = book
        self.release: dict[int, Amount] = {}
        candidates = []
        for job in running:
            if job.id in stopping:
                self._give_back(job, self.release)
            elif book.reclaimable(job.queue) and job.started_at <= started_before:
                candidates.append(job)
        candidates.sort(
            key=lambda job: (
                not book.over_fair_share(job.queue),
                job.priority,
                -job.started_at,
                job.id,
            )
        )
        self.pool = candidates
        self.taken: set[str] = set()
        self.lowest = min((job.priority for job in candidates), default=None)

    def may_help(self, priority: int) -> bool:
        """False when neither released room nor any victim could serve a job of `priority`."""
        return bool(self.release) or (self.lowest is not None and self.lowest < priority)

    def make_room(
        self, demand: Resources, workers: int, priority: int, queue: str
    ) -> list[str] | None:
        """Find and claim room for a gang, stopping the fewest lower-priority jobs needed.

        Returns:
            The ids of the jobs to preempt (empty when room being released already suffices),
            or None when even all eligible victims would not make it fit (nothing changes).
        """
        extra = {i: list(room) for i, room in self.release.items() if i not in self.index.reserved}
        total = sum(
            self._slots(i, extra, demand, workers)
            for i in range(len(self.index.names))
            if i not in self.index.reserved
        )
        chosen: list[RunningJob] = []
        floor = self.book.weighted_share(queue)
        lost: dict[str, Resources] = {}
        for job in self.pool:
            if total >= workers:
                break
            if job.priority >= priority or job.id in self.taken:
                continue
            if job.queue != queue:
                losing = lost.get(job.queue, EMPTY) - job.demand.times(len(job.placement))
                if self.book.weighted_share(job.queue, losing) < floor:
                    continue
                lost[job.queue] = losing
            total += self._shift(job, extra, demand, workers, +1)
            chosen.append(job)
        if total < workers:
            return None
        for job in reversed(chosen):
            change = self._shift(job, extra, demand, workers, -1)
            if total + change >= workers:
                total += change
                chosen.remove(job)
            else:
                self._shift(job, extra, demand, workers, +1)
        for job in chosen:
            self.taken.add(job.id)
            self.book.remove(job.queue, job.demand.times(len(job.placement)))
            self._give_back(job, self.release)
        self._claim(self._plan(demand, workers), demand)
        return [job.id for job in chosen]

    def _slots(self, i: int, extra: dict[int, Amount], demand: Resources, limit: int) -> int:
        index = self.index
        room = extra.get(i)
        if room is None:
            return index.free_slots(i, demand, limit)
        cpus, gpus, memory = (
            index.cpus[i] + room[0],
            index.gpus[i] + room[1],
            index.memory[i] + room[2],
        )
        return slots(cpus, gpus, memory, demand, limit)

    def _shift(
        self, job: RunningJob, extra: dict[int, Amount], demand: Resources, limit: int, sign: int
    ) -> int:
        """Add (sign=+1) or take back (-1) `job`'s room in `extra`; the change in slots."""
        change = 0
        for i, count in self._nodes_of(job):
            if i in self.index.reserved:
                continue
            before = self._slots(i, extra, demand, limit)
            room = extra.setdefault(i, [0.0, 0.0, 0.0])
            room[0] += sign * count * job.demand.cpus
            room[1] += sign * count * job.demand.gpus
            room[2] += sign * count * job.demand.memory_gb
            change += self._slots(i, extra, demand, limit) - before
        return change

    def _nodes_of(self, job: RunningJob) -> list[tuple[int, int]]:
        position = self.index.position
        counts = Counter(position[name] for name in job.placement if name in position)
        return list(counts.items())

    def _give_back(self, job: RunningJob, release: dict[int, Amount]) -> None:
        for i, count in self._nodes_of(job):
            room = release.setdefault(i, [0.0, 0.0, 0.0])
            room[0] += count * job.demand.cpus
            room[1] += count * job.demand.gpus
            room[2] += count * job.demand.memory_gb

    def _plan(self, demand: Resources, workers: int) -> Takes:
        """Where the gang goes on free + release: nodes with released room first."""
        visible = [i for i in self.release if i not in self.index.reserved]
        takes: Takes = []
        left = workers
        for i in visible:
            count = self._slots(i, self.release, demand, left)
            if count:
                takes.append((i, count))
                left -= count
        seen = set(visible)
        for bucket in self.index.buckets:
            for i in bucket:
                if left == 0:
                    return takes
                count = 0 if i in seen else self.index.free_slots(i, demand, left)
                if count:
                    takes.append((i, count))
                    left -= count
        return takes

    def _claim(self, takes: Takes, demand: Resources) -> None:
        """Take the planned room: released room first, the rest off the free resources."""
        for i, count in takes:
            need = [count * demand.cpus, count * demand.gpus, count * demand.memory_gb]
            room = self.release.get(i, [0.0, 0.0, 0.0])
            used = [min(n, max(r, 0.0)) for n, r in zip(need, room, strict=True)]
            if i in self.release:
                self.release[i] = [r - u for r, u in zip(room, used, strict=True)]
            rest = [n - u for n, u in zip(need, used, strict=True)]
            self.index.consume(i, rest[0], round(rest[1]), rest[2])
