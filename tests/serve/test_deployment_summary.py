"""`Deployment.from_dict` reads back what `to_dict` wrote, from Python or from the API's JSON
(the CLI's remote `deploy list|show` print through it)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from forgeml.serve.deployments import CanarySpec, Deployment, DeploymentSpec
from forgeml.serve.deployments._spec import Replica

MOMENT = datetime(2026, 12, 4, 10, 30, tzinfo=UTC)


def _deployment() -> Deployment:
    spec = DeploymentSpec(
        model="adult-mlp@v2",
        model_ref="adult-mlp@production",
        replicas=2,
        canary=CanarySpec(model="adult-mlp@v3", weight=10),
    )
    replicas = [
        Replica("primary", "adult-mlp@v2", "http://127.0.0.1:9001", "ready", 41, 9001, MOMENT),
        Replica("canary", "adult-mlp@v3", "http://127.0.0.1:9002", "starting", None, 9002, None),
    ]
    return Deployment("web", spec, "ready", 3, MOMENT, MOMENT, None, replicas)


@pytest.mark.parametrize("through_json", [False, True])
def test_a_deployment_reads_back_from_its_summary(through_json: bool) -> None:
    summary = _deployment().to_dict()
    if through_json:
        summary = orjson.loads(orjson.dumps(summary))

    assert Deployment.from_dict(summary) == _deployment()
