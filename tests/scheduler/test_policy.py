from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forgeml.scheduler.model import (
    Decisions,
    NodeState,
    PendingJob,
    QueueState,
    Resources,
    RunningJob,
)
from forgeml.scheduler.policy import PolicyOptions, fifo_schedule, schedule

NODE = Resources(cpus=64, gpus=8, memory_gb=512)
GPU = Resources(cpus=4, gpus=1, memory_gb=32)
NO_RESERVATION = PolicyOptions(reserve_after_s=1e12)
LATER = 3600.0  # past the default minimum run time of every running job


def nodes(count: int, capacity: Resources = NODE) -> list[NodeState]:
    return [NodeState(f"n{i}", capacity, capacity) for i in range(count)]


def queue(name: str, weight: int = 1, cap: Resources | None = None, reclaim: bool = True):
    return QueueState(name, weight, cap, reclaim)


def job(
    name: str,
    queue: str = "q",
    priority: int = 100,
    demand: Resources = GPU,
    workers: int = 1,
    at: float = 0.0,
) -> PendingJob:
    return PendingJob(name, queue, priority, demand, workers, at)


def run(
    cluster: list[NodeState],
    name: str,
    where: tuple[str, ...],
    queue: str = "q",
    priority: int = 100,
    demand: Resources = GPU,
    started: float = 0.0,
) -> RunningJob:
    """A running job, with its room taken off `cluster`."""
    by_name = {node.name: node for node in cluster}
    for node_name in where:
        by_name[node_name].free = by_name[node_name].free - demand
    return RunningJob(name, queue, priority, demand, where, started)


def placed(decisions: Decisions) -> dict[str, tuple[str, ...]]:
    return {placement.job_id: placement.nodes for placement in decisions.place}


def test_empty_inputs_decide_nothing():
    assert schedule([], [], [], [], now=0.0) == Decisions()
    assert schedule(nodes(2), [queue("q")], [], [], now=0.0) == Decisions()


def test_weighted_drf_splits_gpus_by_weight():
    cluster = nodes(1, Resources(cpus=64, gpus=9, memory_gb=512))
    pending = [job(f"a{i}", "a", at=i) for i in range(20)]
    pending += [job(f"b{i}", "b", at=i) for i in range(20)]

    decisions = schedule(cluster, [queue("a", 2), queue("b", 1)], pending, [], now=100.0)

    by_queue = Counter(name[0] for name in placed(decisions))
    assert by_queue == {"a": 6, "b": 3}


def test_drf_serves_the_queue_with_the_lowest_dominant_share_first():
    cluster = nodes(2)
    # "cpu" holds 96 of 128 CPUs (dominant share 0.75); "gpu" holds 4 of 16 GPUs (0.25)
    hog = Resources(cpus=48, gpus=0, memory_gb=8)
    running = [run(cluster, "r0", ("n0",), "cpu", demand=hog)]
    running += [run(cluster, "r1", ("n1",), "cpu", demand=hog)]
    running += [run(cluster, f"g{i}", ("n0",), "gpu") for i in range(4)]
    ten_cpus = Resources(cpus=10, gpus=1, memory_gb=1)  # room for one: on n1
    pending = [job("from-cpu", "cpu", demand=ten_cpus, at=0), job("from-gpu", "gpu", at=1)]
    pending[1] = job("from-gpu", "gpu", demand=ten_cpus, at=1)

    decisions = schedule(cluster, [queue("cpu"), queue("gpu")], pending, running, now=2.0)

    assert placed(decisions) == {"from-gpu": ("n1",)}


def test_capability_is_a_hard_cap():
    cluster = nodes(2)
    cap = Resources(cpus=1000, gpus=4, memory_gb=10_000)
    running = [run(cluster, "r", ("n0",), "capped")]
    pending = [job(f"j{i}", "capped", at=i) for i in range(10)]

    decisions = schedule(cluster, [queue("capped", cap=cap)], pending, running, now=0.0)

    assert list(placed(decisions)) == ["j0", "j1", "j2"]


def test_capability_blocks_a_big_job_but_not_the_small_ones_behind_it():
    cap = Resources(cpus=1000, gpus=4, memory_gb=10_000)
    pending = [job("big", demand=Resources(8, 8, 8), at=0), job("small", at=1)]

    decisions = schedule(nodes(2), [queue("q", cap=cap)], pending, [], now=0.0)

    assert list(placed(decisions)) == ["small"]


def test_higher_priority_first_then_older_inside_a_queue():
    cluster = nodes(1, Resources(cpus=64, gpus=2, memory_gb=512))
    pending = [
        job("old-low", priority=0, at=0),
        job("new-high", priority=1000, at=5),
        job("older-normal", priority=100, at=1),
        job("newer-normal", priority=100, at=2),
    ]

    decisions = schedule(cluster, [queue("q")], pending, [], now=10.0)

    assert list(placed(decisions)) == ["new-high", "older-normal"]


def test_gang_is_placed_whole_or_not_at_all():
    cluster = nodes(2)
    half = Resources(cpus=4, gpus=4, memory_gb=4)
    running = [run(cluster, "r0", ("n0",), demand=half), run(cluster, "r1", ("n1",), demand=half)]
    four_gpus = Resources(cpus=4, gpus=4, memory_gb=4)
    pending = [job("three", demand=four_gpus, workers=3, at=0)]

    decisions = schedule(cluster, [queue("q")], pending, running, now=0.0, options=NO_RESERVATION)

    assert decisions == Decisions()
    two = [job("two", demand=four_gpus, workers=2)]
    assert placed(schedule(cluster, [queue("q")], two, running, now=0.0)) == {"two": ("n0", "n1")}


def test_gang_workers_may_share_a_node():
    pending = [job("four", demand=Resources(cpus=8, gpus=2, memory_gb=64), workers=4)]

    decisions = schedule(nodes(2), [queue("q")], pending, [], now=0.0)

    assert sorted(placed(decisions)["four"]) == ["n0", "n0", "n0", "n0"]


def test_best_fit_keeps_whole_nodes_for_big_gangs():
    cluster = nodes(2)
    running = [run(cluster, "r", ("n0",), demand=Resources(4, 7, 4))]
    pending = [job("one", at=0), job("whole", demand=Resources(8, 8, 8), at=1)]

    decisions = schedule(cluster, [queue("q")], pending, running, now=0.0)

    assert placed(decisions) == {"one": ("n0",), "whole": ("n1",)}


def test_backfill_starts_small_jobs_behind_a_blocked_big_one():
    cluster = nodes(2)
    running = [run(cluster, "r", ("n0",)), run(cluster, "s", ("n1",))]
    pending = [job("big", demand=NODE, workers=2, at=0), job("small", at=10)]

    decisions = schedule(cluster, [queue("q")], pending, running, now=60.0)

    assert list(placed(decisions)) == ["small"]


def test_a_starving_big_job_gets_nodes_reserved():
    cluster = nodes(3)
    running = [run(cluster, "r", ("n0",)), run(cluster, "s", ("n1",)), run(cluster, "t", ("n2",))]
    pending = [job("big", demand=NODE, workers=2, at=0), job("small", at=10)]
    options = PolicyOptions(reserve_after_s=600)

    early = schedule(cluster, [queue("q")], pending, running, now=599.0, options=options)
    late = schedule(cluster, [queue("q")], pending, running, now=600.0, options=options)

    assert "small" in placed(early)
    # two of the three nodes are withheld for "big"; "small" may only use the third
    assert len(set(placed(late)["small"])) == 1
    smalls = [job(f"small{i}", at=10 + i) for i in range(20)]
    crowd = schedule(
        cluster, [queue("q")], [pending[0], *smalls], running, now=600.0, options=options
    )
    assert {node for nodes_ in placed(crowd).values() for node in nodes_} == {
        placed(late)["small"][0]
    }


def simulate(options: PolicyOptions, cycles: int) -> int | None:
    """The cycle at which a 2-node gang starts while 1-GPU jobs keep arriving, or None."""
    cluster = nodes(2)
    by_name = {node.name: node for node in cluster}
    pending = {"big": job("big", demand=NODE, workers=2, at=0.0)}
    running = {name: (run(cluster, name, (name,)), 2) for name in ("n0", "n1")}
    for cycle in range(cycles):
        now = cycle * 60.0
        for name in [name for name, (_, ends) in running.items() if ends == cycle]:
            done, _ = running.pop(name)
            for node_name in done.placement:
                by_name[node_name].free = by_name[node_name].free + done.demand
        pending.update({f"s{cycle}.{i}": job(f"s{cycle}.{i}", at=now) for i in range(4)})
        current = [record for record, _ in running.values()]
        decisions = schedule(
            cluster, [queue("q")], [*pending.values()], current, now=now, options=options
        )
        for placement in decisions.place:
            started = pending.pop(placement.job_id)
            if started.id == "big":
                return cycle
            record = run(cluster, started.id, placement.nodes, started=now)
            running[started.id] = (record, cycle + 2 + len(running) % 5)
    return None


def test_backfill_never_starves_the_big_job():
    assert simulate(NO_RESERVATION, cycles=200) is None  # small jobs keep both nodes busy
    started = simulate(PolicyOptions(reserve_after_s=600), cycles=200)
    assert started is not None
    assert started <= 600 / 60 + 8  # reserved at 10 min, then the nodes drain in a few cycles


def preemption_cluster() -> tuple[list[NodeState], list[QueueState], list[RunningJob]]:
    """One 8-GPU node: a non-reclaimable low job (4 GPUs) and two batch jobs (2 GPUs each)."""
    cluster = nodes(1)
    two = Resources(cpus=2, gpus=2, memory_gb=2)
    running = [
        run(cluster, "prod-low", ("n0",) * 4, "prod", priority=0),
        run(cluster, "batch-normal", ("n0",), "batch", priority=100, demand=two),
        run(cluster, "batch-low", ("n0",), "batch", priority=0, demand=two),
    ]
    queues = [queue("prod", reclaim=False), queue("batch"), queue("urgent")]
    return cluster, queues, running


def test_preemption_takes_the_lowest_priority_victim_in_a_reclaimable_queue():
    cluster, queues, running = preemption_cluster()
    pending = [job("urgent", "urgent", priority=1000, demand=Resources(2, 2, 2))]

    decisions = schedule(cluster, queues, pending, running, now=LATER)

    assert decisions.preempt == ["batch-low"]
    assert decisions.place == []  # it starts once the victim has stopped


def test_preemption_never_touches_a_non_reclaimable_queue():
    cluster, queues, running = preemption_cluster()
    # 6 GPUs: the two batch jobs give 4, and prod's 4 may not be taken
    pending = [job("urgent", "urgent", priority=1000, demand=Resources(6, 6, 6))]

    assert schedule(cluster, queues, pending, running, now=LATER) == Decisions()


@pytest.mark.parametrize("priority", [0, 100])
def test_preemption_never_takes_equal_or_higher_priority(priority):
    cluster, queues, running = preemption_cluster()
    pending = [job("urgent", "urgent", priority=priority, demand=Resources(4, 4, 4))]

    # only batch-low (2 GPUs) ranks below 100, and 2 GPUs would not be enough
    assert schedule(cluster, queues, pending, running, now=LATER) == Decisions()


def test_preemption_stops_no_more_jobs_than_needed_and_the_newest_first():
    cluster = nodes(1)
    running = [run(cluster, f"low{i}", ("n0",), "batch", priority=0, started=i) for i in range(8)]
    pending = [job("urgent", "urgent", priority=1000, demand=GPU, workers=2)]

    decisions = schedule(
        cluster, [queue("batch"), queue("urgent")], pending, running, now=LATER + 10.0
    )

    assert sorted(decisions.preempt) == ["low6", "low7"]


def test_preemption_prefers_queues_over_their_fair_share():
    cluster = nodes(1)
    running = [run(cluster, f"a{i}", ("n0",), "a", priority=0, started=i) for i in range(6)]
    running += [run(cluster, f"b{i}", ("n0",), "b", priority=0, started=10 + i) for i in range(2)]
    queues = [queue("a"), queue("b"), queue("urgent", weight=2)]
    pending = [job("urgent", "urgent", priority=1000)]

    decisions = schedule(cluster, queues, pending, running, now=LATER + 20.0)

    assert decisions.preempt == ["a5"]  # "a" is over its share; "b" has newer jobs but is not


def test_preemption_keeps_a_queue_at_least_at_the_preemptors_share():
    cluster = nodes(1)
    running = [run(cluster, "b0", ("n0",) * 2, "b", priority=0)]
    running += [run(cluster, "mine", ("n0",) * 6, "urgent", priority=1000)]
    pending = [job("urgent", "urgent", priority=1000, workers=2)]

    decisions = schedule(cluster, [queue("b"), queue("urgent")], pending, running, now=LATER)

    # taking b0 would leave "b" at 0 while "urgent" holds 8 of 8: DRF would hand it back
    assert decisions == Decisions()


def test_room_made_by_preemption_is_not_given_to_other_jobs():
    cluster = nodes(1)
    running = [run(cluster, "low", ("n0",) * 6, "batch", priority=0)]
    pending = [
        job("urgent", "urgent", priority=1000, demand=NODE),
        job("small", "batch", priority=0, workers=2, at=1),
    ]
    queues = [queue("batch"), queue("urgent")]

    decisions = schedule(cluster, queues, pending, running, now=LATER)

    assert decisions.preempt == ["low"]
    assert decisions.place == []  # the 2 free GPUs are part of urgent's room


def test_jobs_being_stopped_are_not_preempted_twice():
    cluster = nodes(1)
    running = [run(cluster, f"low{i}", ("n0",), "batch", priority=0, started=i) for i in range(8)]
    pending = [job("urgent", "urgent", priority=1000, workers=2)]
    queues = [queue("batch"), queue("urgent")]

    first = schedule(cluster, queues, pending, running, now=LATER + 10.0)
    second = schedule(
        cluster, queues, pending, running, now=LATER + 20.0, stopping=set(first.preempt)
    )

    assert len(first.preempt) == 2
    assert second == Decisions()
    stopped = [record for record in running if record.id not in first.preempt]
    for node in cluster:
        node.free = node.free + GPU.times(2)
    third = schedule(cluster, queues, pending, stopped, now=LATER + 30.0)
    assert placed(third) == {"urgent": ("n0", "n0")}


def test_a_job_that_just_started_is_not_preempted():
    cluster, queues, running = preemption_cluster()
    pending = [job("urgent", "urgent", priority=1000, demand=Resources(2, 2, 2))]
    options = PolicyOptions(min_runtime_s=600)

    assert schedule(cluster, queues, pending, running, now=599, options=options) == Decisions()
    assert schedule(cluster, queues, pending, running, now=600, options=options).preempt


def test_fifo_stops_at_the_first_job_that_does_not_fit():
    cluster = nodes(1)
    pending = [
        job("first", priority=0, at=0),
        job("blocked", priority=1000, demand=NODE, at=1),
        job("behind", priority=1000, at=2),
    ]

    decisions = fifo_schedule(cluster, [queue("q")], pending, [], now=0.0)

    assert list(placed(decisions)) == ["first"]


def test_schedule_does_not_modify_its_inputs():
    cluster, queues, running = preemption_cluster()
    before = [NodeState(node.name, node.capacity, node.free) for node in cluster]
    pending = [job("urgent", "urgent", priority=1000), job("other", "batch")]

    schedule(cluster, queues, pending, running, now=0.0)

    assert cluster == before


def test_a_cycle_over_10k_jobs_on_1000_nodes_places_them():
    cluster = nodes(1000)
    shapes = [(GPU, 1), (GPU.times(2), 1), (GPU.times(8), 1), (GPU.times(8), 4), (GPU.times(4), 2)]
    pending = [
        job(f"j{i}", f"q{i % 4}", 100 * (i % 3), *shapes[i % len(shapes)], at=float(i))
        for i in range(10_000)
    ]
    queues = [queue(f"q{i}", weight=i + 1) for i in range(4)]

    decisions = schedule(cluster, queues, pending, [], now=1e6)  # its time: benchmarks/

    assert sum(len(placement.nodes) for placement in decisions.place) > 1000


DEMANDS = st.builds(
    Resources,
    cpus=st.sampled_from([0.0, 0.5, 1.0, 4.0, 16.0]),
    gpus=st.integers(0, 4),
    memory_gb=st.sampled_from([0.0, 1.0, 8.0, 64.0]),
)
QUEUE_NAMES = ["a", "b", "c"]


@st.composite
def worlds(draw):
    """A cluster with running jobs that fit it, queues and pending jobs."""
    capacities = draw(
        st.lists(st.sampled_from([NODE, Resources(16, 2, 64)]), min_size=1, max_size=5)
    )
    cluster = [NodeState(f"n{i}", cap, cap) for i, cap in enumerate(capacities)]
    caps = st.none() | st.builds(Resources, st.just(64.0), st.integers(0, 12), st.just(512.0))
    queues = [
        queue(name, draw(st.integers(1, 4)), draw(caps), draw(st.booleans()))
        for name in QUEUE_NAMES
    ]
    running = []
    for number in range(draw(st.integers(0, 12))):
        demand = draw(DEMANDS)
        where = tuple(
            draw(st.lists(st.sampled_from([n.name for n in cluster]), min_size=1, max_size=3))
        )
        by_name = {node.name: node for node in cluster}
        if all((demand.times(where.count(n))).fits_in(by_name[n].free) for n in set(where)):
            priority = draw(st.sampled_from([0, 100, 1000]))
            running.append(
                run(
                    cluster,
                    f"r{number}",
                    where,
                    draw(st.sampled_from(QUEUE_NAMES)),
                    priority,
                    demand,
                    float(number),
                )
            )
    pending = [
        job(
            f"p{number}",
            draw(st.sampled_from(QUEUE_NAMES)),
            draw(st.sampled_from([0, 100, 1000])),
            draw(DEMANDS),
            draw(st.integers(1, 6)),
            draw(st.floats(0, 5000)),
        )
        for number in range(draw(st.integers(0, 25)))
    ]
    stopping = {record.id for record in running if draw(st.booleans()) and draw(st.booleans())}
    return cluster, queues, running, pending, stopping


def check_placements(cluster, queues, running, pending, decisions):
    by_id = {record.id: record for record in pending}
    used = {node.name: Resources() for node in cluster}
    for placement in decisions.place:
        record = by_id[placement.job_id]
        assert len(placement.nodes) == record.workers
        for name in placement.nodes:
            used[name] = used[name] + record.demand
    assert len({p.job_id for p in decisions.place}) == len(decisions.place)
    for node in cluster:
        assert used[node.name].fits_in(node.free), f"{node.name} over-committed"
    for spec in queues:
        if spec.capability is None:
            continue
        # what the queue holds once this cycle's victims have stopped: the policy hands a
        # victim's share of its queue's cap back in the cycle that preempts it
        held = Resources()
        for record in running:
            if record.queue == spec.name and record.id not in decisions.preempt:
                held = held + record.demand.times(len(record.placement))
        if held.fits_in(spec.capability):
            for placement in decisions.place:
                if by_id[placement.job_id].queue == spec.name:
                    held = held + by_id[placement.job_id].demand.times(len(placement.nodes))
            assert held.fits_in(spec.capability), f"queue {spec.name} passed its cap"


@settings(max_examples=150, deadline=None)
@given(worlds(), st.floats(0, 10_000))
def test_schedule_never_over_commits_a_node_or_a_queue(world, now):
    cluster, queues, running, pending, stopping = world

    decisions = schedule(
        cluster,
        queues,
        pending,
        running,
        now=now,
        stopping=stopping,
        options=PolicyOptions(reserve_after_s=1000),
    )

    check_placements(cluster, queues, running, pending, decisions)
    reclaimable = {spec.name for spec in queues if spec.reclaimable}
    by_id = {record.id: record for record in running}
    top = max((record.priority for record in pending), default=-1)
    assert len(set(decisions.preempt)) == len(decisions.preempt)
    for victim in decisions.preempt:
        assert victim not in stopping
        assert by_id[victim].queue in reclaimable
        assert by_id[victim].priority < top
        assert by_id[victim].started_at <= now - PolicyOptions().min_runtime_s
    assert not {p.job_id for p in decisions.place} & set(decisions.preempt)


@settings(max_examples=100, deadline=None)
@given(worlds())
def test_fifo_never_over_commits_and_keeps_submission_order(world):
    cluster, queues, running, pending, _ = world

    decisions = fifo_schedule(cluster, queues, pending, running, now=0.0)

    check_placements(cluster, queues, running, pending, decisions)
    order = sorted(pending, key=lambda record: (record.submitted_at, record.id))
    assert [p.job_id for p in decisions.place] == [r.id for r in order[: len(decisions.place)]]
    assert decisions.preempt == []


def test_a_starving_job_is_offered_before_the_drf_order():
    cluster = nodes(1)
    running = [run(cluster, f"b{i}", ("n0",), "b") for i in range(7)]
    pending = [job("young", "a", at=3000), job("old", "b", at=0)]
    options = PolicyOptions(reserve_after_s=600)

    decisions = schedule(
        cluster, [queue("a"), queue("b")], pending, running, now=3600, options=options
    )

    assert list(placed(decisions)) == ["old"]  # "a" holds less, but "old" waited too long
    assert list(placed(schedule(cluster, [queue("a"), queue("b")], pending, running, now=700))) == [
        "young"
    ]
