from __future__ import annotations

import asyncio
from typing import Any

import pytest

from forgeml.serve.autoscale import LoadSample, ScalePolicy, ScaleState, decide
from forgeml.serve.autoscale_loop import ReplicaLoad, quantile_ms
from tests._wait import FakeClock

INFLIGHT = ScalePolicy(
    min_replicas=1,
    max_replicas=4,
    target_inflight=2.0,
    up_cooldown_s=10,
    down_window_s=30,
    idle_s=60,
)
TO_ZERO = ScalePolicy(
    min_replicas=0,
    max_replicas=3,
    target_inflight=2.0,
    up_cooldown_s=10,
    down_window_s=30,
    idle_s=60,
)
P99 = ScalePolicy(
    min_replicas=1,
    max_replicas=8,
    target_p99_ms=100.0,
    up_cooldown_s=10,
    down_window_s=30,
    idle_s=60,
)


def run(
    policy: ScalePolicy, steps: list[tuple[float, LoadSample | tuple[float, int]]]
) -> list[int]:
    """Feed (seconds to advance, sample) steps to `decide`; the counts it returned.

    A step's sample may be `(in_flight, replicas)` for short; the replica count of the
    next short sample follows the last decision when given as -1.
    """
    clock, state, counts, current = FakeClock(), ScaleState(), [], 1
    for advance, given in steps:
        clock.advance(advance)
        if isinstance(given, tuple):
            in_flight, replicas = given
            current = current if replicas < 0 else replicas
            sample = LoadSample(current, in_flight=in_flight, requests=int(in_flight))
        else:
            sample = given
        current, state = decide(policy, sample, state, clock())
        counts.append(current)
    return counts


@pytest.mark.parametrize(
    ("in_flight", "replicas", "expected"),
    [
        (2.0, 1, 1),  # on target
        (2.1, 1, 1),  # within the 10% tolerance
        (4.0, 1, 2),
        (7.0, 1, 4),
        (100.0, 2, 4),  # capped at max_replicas
        (6.0, 3, 3),
    ],
)
def test_in_flight_above_target_scales_up_at_once(
    in_flight: float, replicas: int, expected: int
) -> None:
    count, _ = decide(
        INFLIGHT, LoadSample(replicas, in_flight=in_flight, requests=5), ScaleState(), 0.0
    )
    assert count == expected


def test_scale_up_waits_out_its_cooldown_then_adds_again() -> None:
    # 3 in flight wants 2 at once; 6 wants 3, but only 10 s after that; 8 wants 4, 10 s on
    steps: list[tuple[float, LoadSample | tuple[float, int]]] = [
        (0, (3.0, 1)), (1, (6.0, -1)), (5, (6.0, -1)), (5, (6.0, -1)), (1, (8.0, -1)),
        (10, (8.0, -1)),
    ]  # fmt: skip
    assert run(INFLIGHT, steps) == [2, 2, 2, 3, 3, 4]


def test_scale_down_waits_for_the_whole_window_of_low_load() -> None:
    steps: list[tuple[float, LoadSample | tuple[float, int]]] = [(0, (8.0, 1))]  # up to 4
    steps += [(5, (0.5, -1))] * 7  # 35 s of light load: down only once 30 s passed
    counts = run(INFLIGHT, steps)
    assert counts[:6] == [4, 4, 4, 4, 4, 4]  # 25 s after the scale-up: not yet
    assert counts[-1] == 1


def test_flapping_load_does_not_flap_the_replicas() -> None:
    # load alternates every 5 s between 8 in flight (wants 4) and 1 (wants 1) for 2 minutes
    steps: list[tuple[float, LoadSample | tuple[float, int]]] = [
        (5, (8.0 if k % 2 == 0 else 1.0, -1)) for k in range(24)
    ]
    counts = run(INFLIGHT, steps)
    assert counts[0] == 4
    assert set(counts) == {4}, counts  # the window always holds a busy sample


def test_load_that_stops_scales_down_one_window_later_to_min() -> None:
    steps: list[tuple[float, LoadSample | tuple[float, int]]] = [(0, (8.0, 1))]
    steps += [(1, (0.0, -1))] * 40
    counts = run(INFLIGHT, steps)
    assert counts[29] == 4 and counts[-1] == 1 and min(counts) == 1


def test_idle_deployment_with_min_zero_goes_to_zero_after_the_idle_period() -> None:
    idle = LoadSample(1)
    counts = run(TO_ZERO, [(0, idle)] + [(10, idle)] * 6 + [(10, LoadSample(0))] * 3)
    assert counts[:6] == [1, 1, 1, 1, 1, 1]
    assert counts[6:] == [0, 0, 0, 0]


def test_a_loop_that_just_started_waits_a_window_before_scaling_down() -> None:
    quiet = LoadSample(3)
    counts = run(INFLIGHT, [(0, quiet), (29, quiet), (1, quiet)])
    assert counts == [3, 3, 1]


def test_min_one_never_goes_to_zero() -> None:
    counts = run(INFLIGHT, [(0, LoadSample(1))] + [(100, LoadSample(1))] * 5)
    assert set(counts) == {1}


def test_a_waiting_request_starts_one_replica_from_zero_without_cooldown() -> None:
    clock = FakeClock()
    count, state = decide(TO_ZERO, LoadSample(0), ScaleState(last_up=clock()), clock())
    assert count == 0
    clock.advance(0.5)
    count, state = decide(TO_ZERO, LoadSample(0, waiting=True), state, clock())
    assert count == 1 and state.last_up == clock()


def test_a_replica_cold_starting_is_not_scaled_away_before_it_serves() -> None:
    # idle for longer than idle_s before the request, and the start slower than idle_s
    idle, waiting = LoadSample(0), LoadSample(0, waiting=True)
    starting = LoadSample(1, starting=1)
    steps: list[tuple[float, LoadSample | tuple[float, int]]] = [(0, idle), (100, idle)]
    steps += [(1, waiting)] + [(30, starting)] * 4 + [(1, LoadSample(1, requests=1))]
    assert run(TO_ZERO, steps) == [0, 0, 1, 1, 1, 1, 1, 1]


def test_a_request_resets_the_idle_period() -> None:
    idle, busy = LoadSample(1), LoadSample(1, requests=1)
    counts = run(TO_ZERO, [(0, idle), (50, idle), (5, busy), (50, idle), (59, idle), (1, idle)])
    assert counts == [1, 1, 1, 1, 1, 0]


@pytest.mark.parametrize(
    ("p99_ms", "replicas", "expected"),
    [
        (100.0, 2, 2),  # on target
        (105.0, 2, 2),  # within tolerance
        (150.0, 2, 3),
        (1000.0, 2, 4),  # at most double in one step
        (1000.0, 6, 8),  # capped at max
    ],
)
def test_p99_above_target_adds_replicas(p99_ms: float, replicas: int, expected: int) -> None:
    sample = LoadSample(replicas, in_flight=1, requests=10, p99_ms=p99_ms)
    assert decide(P99, sample, ScaleState(), 0.0)[0] == expected


def test_p99_well_under_target_removes_one_after_the_window() -> None:
    fast = LoadSample(3, in_flight=1, requests=10, p99_ms=20.0)
    counts = run(P99, [(0, fast)] + [(10, fast)] * 3)
    assert counts == [3, 3, 3, 2]


def test_bounds_hold_from_any_state() -> None:
    policy = ScalePolicy(min_replicas=2, max_replicas=3, target_inflight=1.0)
    for in_flight in (0.0, 1.0, 50.0):
        for replicas in (1, 2, 3, 5):
            count, _ = decide(policy, LoadSample(replicas, in_flight=in_flight), ScaleState(), 1e6)
            assert 2 <= count <= 3 or count == replicas


def load(*buckets: tuple[float, float]) -> ReplicaLoad:
    return ReplicaLoad(0.0, buckets[-1][1], buckets)


def test_quantile_of_the_requests_between_two_scrapes() -> None:
    before = load((0.1, 10), (0.2, 10), (float("inf"), 10))
    after = load((0.1, 10), (0.2, 110), (float("inf"), 110))  # 100 new, all in (0.1, 0.2]
    assert quantile_ms(0.99, before, after) == pytest.approx(199.0)
    assert quantile_ms(0.5, before, after) == pytest.approx(150.0)
    assert quantile_ms(0.99, after, after) is None  # nothing new


def test_quantile_after_a_replica_restart_uses_the_new_counts_alone() -> None:
    before = load((0.1, 500), (float("inf"), 500))
    after = load((0.1, 4), (float("inf"), 4))
    assert quantile_ms(0.5, before, after) == pytest.approx(50.0)


def test_the_in_flight_gauge_counts_a_request_until_it_is_answered() -> None:
    from forgeml.serve.app import _RequestMetrics
    from forgeml.serve.metrics import ServerMetrics

    metrics = ServerMetrics()
    entered, release = asyncio.Event(), asyncio.Event()

    async def model(scope: Any, receive: Any, send: Any) -> None:
        entered.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    def gauge() -> bytes:
        line = b"forgeml_requests_in_flight "
        (found,) = [x for x in metrics.exposition().splitlines() if x.startswith(line)]
        return found[len(line) :]

    async def main() -> None:
        app = _RequestMetrics(model, metrics, {"m"})
        scope = {"type": "http", "method": "POST", "path": "/v1/models/m:predict", "headers": []}
        sent: list[Any] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}"}

        async def send(message: Any) -> None:
            sent.append(message)

        call = asyncio.create_task(app(scope, receive, send))
        await entered.wait()
        assert gauge() == b"1.0"
        release.set()
        await call
        assert gauge() == b"0.0" and sent[0]["status"] == 200

    assert gauge() == b"0.0"
    asyncio.run(main())
