"""One evaluation cycle of forgeml's embedded alerting, and the loop `forgeml server` runs.

A cycle: collect samples (in-process registries, replica and extra scrapes) stamped with
the injected clock's time, evaluate every rule over them and record the transitions
(`_state.record_evaluation`), then deliver what the channels have not sent yet. A rule whose
evaluation fails (say, a many-to-many match in the data) is logged and skipped for that
cycle; it never stops the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from prometheus_client.registry import CollectorRegistry

from forgeml.core import netguard
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._channels import Channel, deliver
from forgeml.monitor.alerts._collect import (
    collect_registries,
    replica_targets,
    scrape,
    url_target,
)
from forgeml.monitor.alerts._promql import PromQLError
from forgeml.monitor.alerts._rules import AlertRule
from forgeml.monitor.alerts._samples import SampleStore
from forgeml.monitor.alerts._state import Transition, instances, record_evaluation

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 2.0
# where the supervisor starts every replica (`forgeml serve --host 127.0.0.1`): a replica row
# naming any other address is not scraped
REPLICA_NETWORKS = ("127.0.0.1/32",)
WARM_UP_S = 300.0


class AlertEvaluator:
    """Evaluates `rules` over recent samples and records alerts in `workspace`'s store.

    Args:
        workspace: where alerts and deliveries are recorded.
        rules: compiled rules (`load_rules`).
        registries: in-process prometheus_client registries read each cycle.
        targets: extra /metrics URLs scraped each cycle.
        scrape_allow_private: let `targets` be private, loopback or link-local addresses
            (off by default: `forgeml.core.netguard`'s SSRF rules).
        scrape_replicas: also scrape every ready deployment replica in the store.
        channels: where notifications go (`build_channels`).
        clock: seconds since the epoch (injected in tests).
        samples: the sample store (a new one by default).
    """

    def __init__(
        self,
        workspace: Workspace,
        rules: Sequence[AlertRule],
        *,
        registries: Sequence[CollectorRegistry] = (),
        targets: Sequence[str] = (),
        scrape_allow_private: bool = False,
        scrape_replicas: bool = True,
        channels: Sequence[Channel] = (),
        clock: Callable[[], float] = time.time,
        samples: SampleStore | None = None,
        external_url: str = "",
        max_age_s: float = 3600.0,
    ) -> None:
        self.workspace = workspace
        self.rules = list(rules)
        self.registries = list(registries)
        self.targets = [url_target(url) for url in targets]
        self.scrape_replicas = scrape_replicas
        self.channels = list(channels)
        self.clock = clock
        self.samples = samples if samples is not None else SampleStore()
        self.external_url = external_url
        self.max_age_s = max_age_s
        # no redirects (a 3xx is a failed scrape), each connection to the address checked
        targets_policy = netguard.UrlPolicy(
            who="The alert scrape", allow_private=scrape_allow_private
        )
        replicas_policy = netguard.UrlPolicy(
            who="The replica scrape", allow_networks=REPLICA_NETWORKS
        )
        self._client = netguard.guarded_client(targets_policy, timeout=SCRAPE_TIMEOUT_S)
        self._replica_client = netguard.guarded_client(replicas_policy, timeout=SCRAPE_TIMEOUT_S)
        self._first_at: float | None = None

    def add_registry(self, registry: CollectorRegistry) -> None:
        """Read `registry` too from the next cycle on."""
        self.registries.append(registry)

    def collect(self, at: float) -> None:
        collect_registries(self.samples, self.registries, at)
        scrape(self.samples, self.targets, at, self._client)
        if self.scrape_replicas:
            scrape(self.samples, replica_targets(self.workspace), at, self._replica_client)

    def evaluate(self, at: float) -> list[Transition]:
        """Evaluate every rule at `at` and record the transitions."""
        if self._first_at is None:
            self._first_at = at
        # a rule reading a window this (re)started evaluator has not filled yet (rate needs
        # two samples) cannot tell an alert is over: its silence resolves nothing until the
        # window is full, or for 5 minutes at most (a long window must not hold a resolved
        # alert open for half an hour)
        since = at - self._first_at
        warming = frozenset(r.name for r in self.rules if since < min(r.range_s, WARM_UP_S))
        results = []
        for rule in self.rules:
            try:
                results.append((rule, instances(rule, self.samples, at, self.external_url)))
            except (PromQLError, ArithmeticError) as error:
                log.warning("alert rule %s (%s) failed: %s", rule.name, rule.file, error)
        return record_evaluation(self.workspace, results, at, warming)

    def cycle(self) -> list[Transition]:
        """Collect, evaluate, deliver: one cycle at the clock's time."""
        at = self.clock()
        self.collect(at)
        transitions = self.evaluate(at)
        for transition in transitions:
            log.info("alert %s %s (%s)", transition.rule, transition.state, transition.alert_id)
        deliver(self.workspace, self.channels, datetime.fromtimestamp(at, UTC), self.max_age_s)
        return transitions

    def close(self) -> None:
        self._client.close()
        self._replica_client.close()


def serve_alerts(evaluator: AlertEvaluator, interval: float, stop: threading.Event) -> None:
    """Run `evaluator.cycle` every `interval` seconds until `stop` is set; a cycle that
    fails (the store unreachable) is logged and the next one runs as usual."""
    while not stop.is_set():
        try:
            evaluator.cycle()
        except Exception:  # the loop outlives any one cycle's failure
            log.exception("alert evaluation cycle failed")
        stop.wait(interval)
    evaluator.close()
