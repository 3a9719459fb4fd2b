"""How many replicas a deployment should run: a pure decision, no I/O and no clock of its own.

`decide` takes the deployment's policy, one sample of its load and the state it returned
last time, with the time now, and returns the replica count wanted and the next state. The
control loop (`autoscale_loop`) samples the replicas' `/metrics`, calls it each cycle and
carries the count out; the tests drive it with a table of samples and a fake clock.

The rules follow Kubernetes' HorizontalPodAutoscaler (its algorithm and stabilisation
window, kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale):
- in-flight target: wanted = ceil(in-flight / target), left alone within a 10% tolerance;
- p99 target: above it by more than the tolerance, wanted = ceil(replicas * p99 / target)
  (at most double per step: latency is not linear in load); under half of it, one fewer;
- scale up at once, then not again for `up_cooldown_s` (the new replicas take load first);
- scale down only to the highest count wanted over the last `down_window_s`, and not
  within `down_window_s` of a scale-up (or of the loop's first sample), so load that
  comes and goes does not flap;
- with `min_replicas` 0, after `idle_s` without a request, zero; from zero, one as soon as a
  request waits (a cold start), with no cool-down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from forgeml.serve.deployments import AutoscaleSpec

_TOLERANCE = 0.1
# under this fraction of the p99 target, a replica is spare
_P99_SPARE = 0.5


@dataclass(frozen=True)
class ScalePolicy:
    """A deployment's bounds and target, with the loop's timing."""

    min_replicas: int
    max_replicas: int
    target_inflight: float | None = None
    target_p99_ms: float | None = None
    up_cooldown_s: float = 10.0
    down_window_s: float = 30.0
    idle_s: float = 60.0

    @classmethod
    def of(cls, spec: AutoscaleSpec, **timing: float) -> ScalePolicy:
        """The policy of a deployment's autoscale spec, with `timing` overrides."""
        return cls(
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
            target_inflight=spec.target_inflight,
            target_p99_ms=spec.target_p99_ms,
            **timing,
        )


@dataclass(frozen=True)
class LoadSample:
    """A deployment's load at one cycle.

    Attributes:
        replicas: primary replicas serving or starting (those starting count: they are
            on their way, and another is not wanted for the same load).
        in_flight: requests in flight over all serving replicas.
        requests: requests answered since the last sample.
        p99_ms: the worst replica's p99 latency since the last sample (None: no requests).
        waiting: a caller waits at the gateway for a replica (a cold start).
        starting: how many of `replicas` are still starting.
    """

    replicas: int
    in_flight: float = 0.0
    requests: int = 0
    p99_ms: float | None = None
    waiting: bool = False
    starting: int = 0


@dataclass(frozen=True)
class ScaleState:
    """What `decide` remembers between cycles."""

    last_up: float | None = None
    last_down: float | None = None
    idle_since: float | None = None
    # the first sample seen: a loop that just started has no window of history yet
    first_seen: float | None = None
    # the counts wanted in the last `down_window_s`: (time, count)
    recent: tuple[tuple[float, int], ...] = ()


def decide(
    policy: ScalePolicy, sample: LoadSample, state: ScaleState, now: float
) -> tuple[int, ScaleState]:
    """The replica count to run now, and the state to pass next time.

    Args:
        policy: bounds, target and timing.
        sample: the load now.
        state: what the last call returned (`ScaleState()` the first time).
        now: the time, in seconds on any monotonic clock.
    """
    # a replica on its way has had no chance to serve: the idle clock waits for it (else a
    # cold start slower than `idle_s` would be scaled away before its caller is answered)
    busy = sample.requests > 0 or sample.in_flight > 0 or sample.waiting or sample.starting > 0
    idle_since = None if busy else (now if state.idle_since is None else state.idle_since)
    first_seen = now if state.first_seen is None else state.first_seen
    state = replace(state, idle_since=idle_since, first_seen=first_seen)
    current = sample.replicas
    if current == 0:
        wanted = max(policy.min_replicas, 1 if busy else 0)
        if wanted == 0:
            return 0, state
        return min(wanted, policy.max_replicas), replace(state, last_up=now, recent=())
    idle_long = idle_since is not None and now - idle_since >= policy.idle_s
    if policy.min_replicas == 0 and idle_long:
        return 0, replace(state, last_down=now, recent=())
    raw = _clamp(_recommend(policy, sample), max(policy.min_replicas, 1), policy.max_replicas)
    window = now - policy.down_window_s
    recent = (*(item for item in state.recent if item[0] > window), (now, raw))
    state = replace(state, recent=recent)
    if raw > current:
        if state.last_up is not None and now - state.last_up < policy.up_cooldown_s:
            return current, state
        return raw, replace(state, last_up=now)
    stable = max(count for _, count in recent)
    settled = now - max(first_seen, state.last_up or first_seen) >= policy.down_window_s
    if stable < current and settled:
        return stable, replace(state, last_down=now)
    return current, state


def _recommend(policy: ScalePolicy, sample: LoadSample) -> int:
    """The count the load asks for, before bounds and stabilisation."""
    current = sample.replicas
    if policy.target_p99_ms is not None:
        if sample.p99_ms is None:
            return current - 1 if sample.in_flight == 0 else current
        ratio = sample.p99_ms / policy.target_p99_ms
        if ratio > 1.0 + _TOLERANCE:
            return min(math.ceil(current * ratio), 2 * current)
        return current - 1 if ratio < _P99_SPARE else current
    target = policy.target_inflight or 1.0
    ratio = sample.in_flight / (target * current)
    if abs(ratio - 1.0) <= _TOLERANCE:
        return current
    return math.ceil(sample.in_flight / target)


def _clamp(count: int, low: int, high: int) -> int:
    return max(low, min(count, high))
