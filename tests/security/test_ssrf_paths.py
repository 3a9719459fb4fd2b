"""TorchServe CVE-2023-43654 (SSRF through a model server URL) replayed against each place
a forgeml server fetches a URL: the agents' `predict` tool, the alert scrape (extra
targets and replicas) and the MLflow probe. Each goes through `forgeml.core.netguard`:
a decimal or IPv4-mapped spelling of a private address is refused before any connection,
and a redirect to the metadata service is never followed."""

from __future__ import annotations

import pytest

from forgeml.agents import PredictOptions, ToolRefusedError, predict_tool
from forgeml.core.ids import new_id
from forgeml.core.store import DeploymentRecord, DeploymentReplicaRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import AlertEvaluator, SampleStore
from forgeml.tracking._mlflow import TrackingUnavailableError, _probe
from tests._wait import FakeClock
from tests.security.conftest import Site

METADATA = "http://169.254.169.254/latest/meta-data/"
PRIVATE_SPELLINGS = [
    "http://2130706433:{port}",  # 127.0.0.1, decimal
    "http://[::ffff:127.0.0.1]:{port}",  # IPv4-mapped IPv6
    "http://169.254.169.254",  # cloud metadata
]
ROUTE = "/v1/models/m:predict"


@pytest.mark.parametrize("server", PRIVATE_SPELLINGS)
def test_cve_2023_43654_predict_refuses_a_private_server(site: Site, server: str) -> None:
    tool = predict_tool(PredictOptions(url=server.format(port=site.port), model="m"))

    with pytest.raises(ToolRefusedError, match="predict reaches public addresses only"):
        tool.function(instances=[{"x": 1}])

    assert site.seen == []


def test_cve_2023_43654_predict_never_follows_a_redirect_to_the_metadata_service(
    site: Site,
) -> None:
    site.routes[ROUTE] = (307, {"Location": METADATA}, b"")
    tool = predict_tool(PredictOptions(url=site.url, model="m", allow_private=True))

    with pytest.raises(ToolRefusedError, match=r"HTTP 307"):
        tool.function(instances=[{"x": 1}])

    assert site.seen == [("POST", ROUTE, f"127.0.0.1:{site.port}")]


def _add_replica(workspace: Workspace, host: str, port: int) -> None:
    with workspace.store.session() as session:
        deployment = DeploymentRecord(
            id=new_id(), name=f"dep-{new_id()[:6]}", status="ready", spec={}, revision=1,
            created_by="t",
        )  # fmt: skip
        session.add(deployment)
        session.flush()
        session.add(
            DeploymentReplicaRecord(
                id=new_id(), deployment_id=deployment.id, role="primary", model_ref="m@v1",
                host=host, port=port, status="ready",
            )
        )  # fmt: skip


def test_cve_2023_43654_the_alert_scrape_refuses_private_targets_and_redirects(
    workspace: Workspace, site: Site
) -> None:
    site.routes["/metrics"] = (302, {"Location": METADATA}, b"")
    targets = [url.format(port=site.port) + "/metrics" for url in PRIVATE_SPELLINGS]
    # replica rows the supervisor never writes (replicas listen on 127.0.0.1 only)
    _add_replica(workspace, "2852039166", site.port)  # 169.254.169.254, decimal
    _add_replica(workspace, "::ffff:127.0.0.1", site.port)
    _add_replica(workspace, "127.0.0.1", site.port)  # the real one: redirects, not followed
    samples = SampleStore()
    evaluator = AlertEvaluator(workspace, [], targets=targets, samples=samples, clock=FakeClock())
    try:
        evaluator.cycle()
    finally:
        evaluator.close()

    assert site.seen == [("GET", "/metrics", f"127.0.0.1:{site.port}")]
    assert len(samples) == 0


def test_cve_2023_43654_the_mlflow_probe_never_follows_a_redirect(site: Site) -> None:
    site.routes["/health"] = (302, {"Location": METADATA}, b"")
    _probe(site.url)  # answered: the server is there; the hop is not taken

    site.routes["/health"] = (503, {}, b"down")
    with pytest.raises(TrackingUnavailableError, match=r"\(HTTP 503\)"):
        _probe(f"http://2130706433:{site.port}")

    assert [path for _, path, _ in site.seen] == ["/health", "/health"]
