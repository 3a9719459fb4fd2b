"""The serving end of `forgeml demo`: deploy the Adult model, put the gateway in front of it,
send it traffic with an API key, and print the latency of each path.

The deployment is a real `forgeml serve` process started by the control plane; the gateway
runs in this process on its own loopback port; traffic is one raw record per request
(TF-Serving style `:predict`), sequential, so the figures are per-request latencies at low
load. The deployment is stopped at the end, so the demo leaves no process behind.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

from forgeml.cli._output import print_table, say
from forgeml.core.errors import ServiceUnavailableError

if TYPE_CHECKING:
    import httpx

    from forgeml.core.workspace import Workspace

DEPLOYMENT = "adult"
WARMUP = 20
REQUESTS = 200


def serve_demo(workspace: Workspace, model_ref: str, test_ref: str) -> None:
    """Deploy `model_ref` as `adult`, call it directly and through the gateway, then stop it."""
    import httpx

    from forgeml.gateway import GatewayOptions, create_key, gateway_in_thread
    from forgeml.serve.deployments import delete, deploy

    say(f"deploying {model_ref} as '{DEPLOYMENT}' (a model-server process) ...")
    deployment = deploy(workspace, DEPLOYMENT, model_ref, force=True)
    try:
        replica = deployment.replicas[0].url
        _, key = create_key(workspace, "demo", scopes=[DEPLOYMENT], rate_per_s=1000.0)
        gateway_running = gateway_in_thread(workspace, GatewayOptions())
        with gateway_running as gateway, httpx.Client(timeout=30.0) as client:
            # the fields to send are the model's inputs, as its KServe v2 metadata lists them
            metadata = client.get(f"{replica}/v2/models/{DEPLOYMENT}").json()
            fields = [tensor["name"] for tensor in metadata["inputs"]]
            records = _records(workspace, test_ref, fields, REQUESTS)
            path = f"/v1/models/{DEPLOYMENT}:predict"
            direct = _latencies(client, replica + path, records, {})
            auth = {"Authorization": f"Bearer {key}"}
            through = _latencies(client, gateway + path, records, auth)
            refused = client.post(gateway + path, json={"instances": records[:1]})
            answer = client.post(gateway + path, json={"instances": records[:1]}, headers=auth)
        _report(direct, through, refused.status_code, answer.json())
    finally:
        delete(workspace, DEPLOYMENT, grace_seconds=5.0)
        say(f"deployment '{DEPLOYMENT}' stopped; serve it again with "
            f"`forgeml deploy {model_ref} --name {DEPLOYMENT}` and `forgeml gateway`")  # fmt: skip


def _records(
    workspace: Workspace, test_ref: str, fields: list[str], count: int
) -> list[dict[str, Any]]:
    """`count` raw cleaned test rows holding `fields` (the served model's inputs) only."""
    from forgeml.data import catalog

    with workspace.store.session() as session:
        version = catalog.resolve(session, test_ref)
    frame = catalog.read_frame(workspace, version).select(fields).drop_nulls()
    return frame.head(count).to_dicts()


def _latencies(
    client: httpx.Client, url: str, records: list[dict[str, Any]], headers: dict[str, str]
) -> list[float]:
    """Milliseconds per request, one record each, after a warm-up."""
    timings = []
    for position, record in enumerate(records[:WARMUP] + records):
        start = time.perf_counter()
        response = client.post(url, json={"instances": [record]}, headers=headers)
        took = (time.perf_counter() - start) * 1000
        if response.status_code != 200:
            raise ServiceUnavailableError(
                f"The demo's request to {url} failed with {response.status_code}: "
                f"{response.text[:200]}"
            )
        if position >= WARMUP:
            timings.append(took)
    return timings


def _report(direct: list[float], through: list[float], refused: int, answer: Any) -> None:
    from forgeml.optimize.latency import percentile

    def p99(values: list[float]) -> float:
        return percentile(values, 99)

    rows = [
        ("model server, direct", f"{statistics.median(direct):.2f}", f"{p99(direct):.2f}"),
        ("through the gateway", f"{statistics.median(through):.2f}", f"{p99(through):.2f}"),
        (
            "gateway adds",
            f"{statistics.median(through) - statistics.median(direct):.2f}",
            "",
        ),
    ]  # fmt: skip
    title = f"latency of {len(direct)} sequential :predict requests, one raw record each (ms)"
    print_table(title, ["path", "p50", "p99"], rows)
    prediction = answer["predictions"][0]
    say(f"a request without a key: HTTP {refused}; with it: label {prediction['label']!r} "
        f"from {answer.get('model_version', '?')}")  # fmt: skip
