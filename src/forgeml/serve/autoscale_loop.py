"""The autoscaler's control loop: sample each replica's /metrics, decide, carry it out.

`forgeml server` runs `serve_autoscaler` in a thread. Each cycle, for every autoscaled
deployment (`deployments.autoscaled`):

1. replicas on their way are probed: a ready one becomes `ready` (the gateway routes to
   it from its next route refresh), one whose process died is forgotten;
2. draining replicas are stopped once `drain_s` has passed since they left the routes
   (longer than the gateway's route refresh, so no gateway still sends them requests)
   and their in-flight gauge reads 0: scaling in drops no request;
3. the serving replicas' `/metrics` give the load (`forgeml_requests_in_flight`, the
   request count and latency histogram), `autoscale.decide` the count;
4. more: replicas are started and recorded `starting`; fewer: those still starting are
   stopped first (they carry no traffic), then the newest serving ones are marked
   `draining`.

The loop is the only one that starts or stops autoscaled replicas; the gateway asks for a
cold start by writing a `wanted` row (`deployments.request_replica`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from forgeml.core.workspace import Workspace
from forgeml.serve import _supervisor
from forgeml.serve.autoscale import LoadSample, ScalePolicy, ScaleState, decide
from forgeml.serve.deployments import ScaledDeployment, ScaledReplica, autoscaled
from forgeml.serve.deployments import _replicas as replicas

log = logging.getLogger(__name__)

# seconds a replica stays out of the routes, still serving, before it may stop: the
# gateway refreshes its routes every 2 s (GatewayOptions.refresh_s)
DRAIN_S = 5.0
_STOP_GRACE_S = 10.0
# seconds between two cycles in `forgeml server`: also the most a cold start waits for
# the loop to see its request
INTERVAL_S = 1.0


@dataclass(frozen=True)
class ReplicaLoad:
    """One scrape of a replica's /metrics."""

    in_flight: float
    requests: float  # answered so far (a counter)
    buckets: tuple[tuple[float, float], ...]  # the latency histogram: (le, cumulative count)


def scrape(url: str, timeout: float = 2.0) -> ReplicaLoad | None:
    """The load of the replica at `url` now (None: it does not answer)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    try:
        response = httpx.get(f"{url}/metrics", timeout=timeout)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    in_flight = requests = 0.0
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "forgeml_requests_in_flight":
                in_flight += sample.value
            elif sample.name == "forgeml_request_latency_seconds_count":
                requests += sample.value
            elif sample.name == "forgeml_request_latency_seconds_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return ReplicaLoad(in_flight, requests, tuple(sorted(buckets.items())))


def quantile_ms(q: float, before: ReplicaLoad | None, after: ReplicaLoad) -> float | None:
    """The `q` quantile (ms) of the requests answered between two scrapes, interpolated in
    its bucket as Prometheus' `histogram_quantile` does; None when there were none."""
    earlier = dict(before.buckets) if before is not None else {}
    if before is not None and after.requests < before.requests:
        earlier = {}  # the replica restarted: its counters began again
    deltas = [(bound, count - earlier.get(bound, 0.0)) for bound, count in after.buckets]
    if not deltas or deltas[-1][1] <= 0:
        return None
    rank = q * deltas[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in deltas:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound * 1000.0  # beyond the last finite bucket: its bound
            share = (rank - lower_count) / (count - lower_count) if count > lower_count else 1.0
            return (lower_bound + (bound - lower_bound) * share) * 1000.0
        lower_bound, lower_count = bound, count
    return None


@dataclass
class _Memory:
    """What the loop remembers of one deployment between cycles."""

    state: ScaleState = field(default_factory=ScaleState)
    draining_since: dict[str, float] = field(default_factory=dict)  # row id -> clock
    starting_since: dict[str, float] = field(default_factory=dict)  # row id -> clock


class Autoscaler:
    """The control loop over every autoscaled deployment of a workspace."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        clock: Callable[[], float] = time.monotonic,
        drain_s: float = DRAIN_S,
        ready_timeout_s: float = 120.0,
        timing: dict[str, float] | None = None,
    ) -> None:
        self.workspace = workspace
        self.clock = clock
        self.drain_s = drain_s
        self.ready_timeout_s = ready_timeout_s
        self.timing = timing or {}  # ScalePolicy's cool-downs and idle time
        self._memory: dict[str, _Memory] = {}
        self._loads: dict[str, ReplicaLoad] = {}  # url -> its last scrape

    def cycle(self) -> None:
        """One round over every autoscaled deployment; one's failure does not stop the rest."""
        for deployment in autoscaled(self.workspace):
            try:
                self._scale(deployment)
            except replicas.StaleRevisionError:
                continue  # redeployed meanwhile: the next cycle reads the new revision
            except Exception:
                log.exception("autoscaling deployment %s failed", deployment.name)

    def _scale(self, deployment: ScaledDeployment) -> None:
        memory = self._memory.setdefault(deployment.name, _Memory())
        now = self.clock()
        starting = self._advance_starting(deployment, memory, now)
        self._finish_draining(deployment, memory, now)
        serving = [
            r for r in deployment.having(replicas.READY) if r.id not in memory.draining_since
        ]
        serving += [r for r in starting if r.status == replicas.READY]
        starting = [r for r in starting if r.status != replicas.READY]
        sample = self._sample(deployment, serving, len(starting))
        assert deployment.spec.autoscale is not None
        policy = ScalePolicy.of(deployment.spec.autoscale, **self.timing)
        wanted, memory.state = decide(policy, sample, memory.state, now)
        current = sample.replicas
        if wanted > current:
            for _ in range(wanted - current):
                self._start(deployment, memory, now)
        elif wanted < current:
            self._shrink(deployment, memory, starting, serving, current - wanted, now)
        if wanted != current:
            why = f"in flight {sample.in_flight:g}, p99 {sample.p99_ms} ms, {sample.requests} new"
            log.info("deployment %s: %d -> %d replicas (%s)", deployment.name, current, wanted, why)
            replicas.audit_scale(self.workspace, deployment.name, current, wanted, why)

    def _sample(
        self, deployment: ScaledDeployment, serving: list[ScaledReplica], starting: int
    ) -> LoadSample:
        in_flight, answered, worst = 0.0, 0.0, None
        for replica in serving:
            load = scrape(replica.url)
            if load is None:
                continue
            before = self._loads.get(replica.url)
            self._loads[replica.url] = load
            in_flight += load.in_flight
            answered += max(0.0, load.requests - (before.requests if before else 0.0))
            p99 = quantile_ms(0.99, before, load)
            worst = p99 if worst is None or (p99 is not None and p99 > worst) else worst
        return LoadSample(
            replicas=len(serving) + starting,
            in_flight=in_flight,
            requests=int(answered),
            p99_ms=worst,
            waiting=bool(deployment.having(replicas.WANTED)),
            starting=starting,
        )

    def _advance_starting(
        self, deployment: ScaledDeployment, memory: _Memory, now: float
    ) -> list[ScaledReplica]:
        """Probe replicas on their way; those ready come back with status `ready`."""
        kept = []
        for replica in deployment.having(replicas.STARTING):
            since = memory.starting_since.setdefault(replica.id, now)
            if _supervisor.probe(replica.url, 1.0):
                replicas.set_status(self.workspace, deployment.name, replica.id, replicas.READY)
                memory.starting_since.pop(replica.id, None)
                kept.append(replace(replica, status=replicas.READY))
                continue
            alive = replica.pid is not None and _supervisor.is_running(replica.pid, replica.port)
            if alive and now - since < self.ready_timeout_s:
                kept.append(replica)
                continue
            log.warning("deployment %s: replica %s did not start", deployment.name, replica.url)
            self._stop(deployment, memory, replica)
        return kept

    def _finish_draining(self, deployment: ScaledDeployment, memory: _Memory, now: float) -> None:
        """Stop each draining replica that left the routes long enough ago and is idle."""
        for replica in deployment.having(replicas.DRAINING):
            since = memory.draining_since.setdefault(replica.id, now)
            if now - since < self.drain_s:
                continue
            load = scrape(replica.url)
            if load is not None and load.in_flight > 0:
                continue  # still answering: stopping it now would cut those requests
            self._stop(deployment, memory, replica)

    def _start(self, deployment: ScaledDeployment, memory: _Memory, now: float) -> None:
        try:
            server = replicas.spawn_primary(self.workspace, deployment.name, deployment)
        except _supervisor.ReplicaStartError as error:
            log.warning("deployment %s: could not start a replica: %s", deployment.name, error)
            return
        try:
            row_id = replicas.add_starting(
                self.workspace, deployment.name, deployment.revision, server
            )
        except BaseException:
            _supervisor.stop([(server.pid, server.port)], grace_seconds=_STOP_GRACE_S)
            raise
        memory.starting_since[row_id] = now

    def _shrink(
        self,
        deployment: ScaledDeployment,
        memory: _Memory,
        starting: list[ScaledReplica],
        serving: list[ScaledReplica],
        count: int,
        now: float,
    ) -> None:
        """Remove `count` replicas: those starting first, then the newest serving ones."""
        for replica in starting[:count]:
            self._stop(deployment, memory, replica)
        for replica in sorted(serving, key=lambda r: r.port, reverse=True)[
            : max(0, count - len(starting))
        ]:
            # out of the routes now; stopped by a later cycle once drained
            replicas.set_status(self.workspace, deployment.name, replica.id, replicas.DRAINING)
            memory.draining_since[replica.id] = now

    def _stop(self, deployment: ScaledDeployment, memory: _Memory, replica: ScaledReplica) -> None:
        if replica.pid is not None:
            _supervisor.stop([(replica.pid, replica.port)], grace_seconds=_STOP_GRACE_S)
        replicas.remove(self.workspace, deployment.name, replica.id)
        memory.draining_since.pop(replica.id, None)
        memory.starting_since.pop(replica.id, None)
        self._loads.pop(replica.url, None)


def serve_autoscaler(
    workspace: Workspace, interval: float, stop: threading.Event, **options: object
) -> None:
    """Run `Autoscaler.cycle` every `interval` seconds until `stop` is set (the server's)."""
    autoscaler = Autoscaler(workspace, **options)  # type: ignore[arg-type]
    while not stop.is_set():
        started = time.monotonic()
        try:
            autoscaler.cycle()
        except Exception:  # a store hiccup is logged; the next cycle retries
            log.exception("autoscaling cycle failed")
        stop.wait(max(0.0, interval - (time.monotonic() - started)))
