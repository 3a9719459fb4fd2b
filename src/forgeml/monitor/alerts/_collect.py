"""Feeding the sample store: in-process registries and the /metrics of every live replica.

Each cycle reads (a) the prometheus_client registries passed in (the scheduler's
`scheduler_registry(store)` in `forgeml server`, and any other), and (b) the /metrics of
every ready replica of every deployment the store records, plus extra target URLs; each
exposition is parsed with prometheus_client's parser and stamped with the cycle's time.
Scraped series get `instance` (host:port) and, for replicas, `deployment` labels, as a
Prometheus scrape job would; a label the target sets itself is kept as `exported_NAME`
(Prometheus' `honor_labels: false`). A target that does not answer within the timeout has
its series marked stale and is tried again next cycle; so has one whose address
`forgeml.core.netguard` refuses (the evaluator's clients carry the policies).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from sqlalchemy import select

from forgeml.core.errors import UnsafeUrlError
from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._samples import Labels, SampleStore, labels_of

log = logging.getLogger(__name__)

SERVER_INSTANCE = "forgeml-server"
"""The `instance` label of the server's own (in-process) metrics."""


@dataclass(frozen=True)
class Target:
    """A /metrics URL to scrape and the labels its series get."""

    url: str
    labels: tuple[tuple[str, str], ...]


def parse_exposition(text: str, target_labels: dict[str, str]) -> Iterator[tuple[Labels, float]]:
    """The samples of a Prometheus text exposition, with `target_labels` attached."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = dict(sample.labels)
            for name, value in target_labels.items():
                if name in labels:
                    labels[f"exported_{name}"] = labels[name]
                labels[name] = value
            labels["__name__"] = sample.name
            yield labels_of(labels), float(sample.value)


def collect_registries(
    samples: SampleStore, registries: Sequence[CollectorRegistry], at: float
) -> None:
    """Read every in-process registry into `samples` at `at`."""
    for index, registry in enumerate(registries):
        source = f"registry:{index}"
        try:
            text = generate_latest(registry).decode()
        except Exception as error:
            log.warning("metrics registry %d failed: %s", index, error)
            samples.mark_stale(source, at)
            continue
        samples.ingest(source, parse_exposition(text, {"instance": SERVER_INSTANCE}), at)


def replica_targets(workspace: Workspace) -> list[Target]:
    """The /metrics of every ready replica of every deployment in the store."""
    with workspace.store.session() as session:
        rows = session.execute(
            select(
                DeploymentRecord.name, DeploymentReplicaRecord.host, DeploymentReplicaRecord.port
            )
            .join(DeploymentRecord, DeploymentRecord.id == DeploymentReplicaRecord.deployment_id)
            .where(DeploymentReplicaRecord.status == "ready")
        ).all()
    return [
        Target(
            f"http://{_netloc(host, port)}/metrics",
            (("deployment", name), ("instance", _netloc(host, port))),
        )
        for name, host, port in rows
    ]


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url_target(url: str) -> Target:
    """An extra target given by URL: `instance` is its host:port."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return Target(url, (("instance", f"{parsed.host}:{port}"),))


def scrape(samples: SampleStore, targets: Sequence[Target], at: float, client: httpx.Client) -> int:
    """Scrape every target into `samples` at `at`; returns how many answered."""
    answered = 0
    for target in targets:
        source = f"scrape:{target.url}"
        try:
            response = client.get(target.url)
            response.raise_for_status()
            parsed = list(parse_exposition(response.text, dict(target.labels)))
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, UnsafeUrlError) as error:
            log.info("scrape of %s failed: %s", target.url, error)
            samples.mark_stale(source, at)
            continue
        samples.ingest(source, parsed, at)
        answered += 1
    return answered
