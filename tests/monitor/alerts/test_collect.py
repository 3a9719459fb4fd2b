from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from forgeml.core.ids import new_id
from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import AlertEvaluator, SampleStore, labels_of
from forgeml.serve._supervisor import free_port
from tests.monitor.alerts.conftest import FakeClock


@pytest.fixture
def exporter() -> Iterator[tuple[int, Gauge]]:
    registry = CollectorRegistry()
    depth = Gauge("forgeml_queue_depth", "d", ["model"], registry=registry)
    depth.labels("m").set(4)
    server, thread = start_http_server(0, "127.0.0.1", registry)
    yield server.server_port, depth
    server.shutdown()
    server.server_close()
    thread.join(10)


def test_registries_replicas_and_targets_are_sampled_with_their_labels(
    workspace: Workspace, clock: FakeClock, exporter: tuple[int, Gauge]
) -> None:
    port, depth = exporter
    with workspace.store.session() as session:
        deployment = DeploymentRecord(
            id=new_id(), name="dep", status="ready", spec={}, revision=1, created_by="t"
        )
        session.add(deployment)
        session.flush()
        session.add(
            DeploymentReplicaRecord(
                id=new_id(), deployment_id=deployment.id, role="primary", model_ref="m@v1",
                host="127.0.0.1", port=port, status="ready",
            )
        )  # fmt: skip
    own = CollectorRegistry()
    Counter("forgeml_queue_cost", "c", ["queue"], registry=own).labels("q").inc(2)
    samples = SampleStore()
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    evaluator = AlertEvaluator(
        workspace, [], registries=[own], targets=[f"http://127.0.0.1:{port}/metrics", dead],
        scrape_allow_private=True, samples=samples, clock=clock,
    )  # fmt: skip
    evaluator.cycle()
    replica = labels_of(
        {"__name__": "forgeml_queue_depth", "model": "m", "deployment": "dep",
         "instance": f"127.0.0.1:{port}"}
    )  # fmt: skip
    target = labels_of(
        {"__name__": "forgeml_queue_depth", "model": "m", "instance": f"127.0.0.1:{port}"}
    )
    server = labels_of(
        {"__name__": "forgeml_queue_cost_total", "queue": "q", "instance": "forgeml-server"}
    )
    for labels, value in ((replica, 4.0), (target, 4.0), (server, 2.0)):
        assert samples.instant(labels, clock(), 300) == value
    # a replica that stops exporting a series: stale at the next scrape, not 5 minutes later
    depth.remove("m")
    clock.advance(10)
    evaluator.cycle()
    assert samples.instant(replica, clock(), 300) is None
    evaluator.close()


def test_the_sample_store_is_bounded_by_its_retention() -> None:
    samples = SampleStore(retention=60)
    labels = labels_of({"__name__": "x"})
    for second in range(0, 600, 10):
        samples.ingest("s", [(labels, float(second))], float(second))
    assert len(samples) == 7  # 530..590
    assert samples.window(labels, 0, 600)[0] == (530.0, 530.0)
