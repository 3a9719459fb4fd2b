"""The gateway figure of `benchmarks/peers.py`: forgeml's gateway against LiteLLM's proxy.

One forgeml replica of the MiniLM encoder (`forgeml deploy`, batching 32) is called with
OpenAI's `POST /v1/embeddings` directly, through `forgeml gateway` (an API key) and through
LiteLLM's proxy (its master key; the model as `openai/sst2-minilm` on the replica's `/v1`).
Each round measures the three paths back to back, in an order that rotates round by round;
"added" is the median over rounds of the path's p50 minus the direct p50 of the same round,
"rate lost" one minus the median of the path's requests/s over the direct ones.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import yaml

from peers_serving import PeerError, Server, _answers, _launch, _medians, _peer_env, stop
from peers_setup import VENVS
from serving import TEXT, measure, start_gateway, stop_server

LITELLM_KEY = "sk-forgeml-bench-peers"
DEPLOYMENT = "sst2-minilm"
BODY = {"model": DEPLOYMENT, "input": TEXT}


def start_litellm(home: Path, scratch: Path, replica: str) -> Server:
    """LiteLLM's proxy (one worker) forwarding `sst2-minilm` to `replica`'s /v1."""
    from forgeml.serve._supervisor import free_port

    config = {
        "model_list": [
            {
                "model_name": DEPLOYMENT,
                "litellm_params": {
                    "model": f"openai/{DEPLOYMENT}",
                    "api_base": f"{replica}/v1",
                    "api_key": "unused",
                },
            }
        ],
        "general_settings": {"master_key": LITELLM_KEY},
        "litellm_settings": {"telemetry": False},
    }
    path = scratch / "litellm.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {LITELLM_KEY}"}
    embeddings = f"{url}/v1/embeddings"
    litellm = VENVS["litellm"].python.parent / "litellm"
    command = [str(litellm), "--config", str(path), "--host", "127.0.0.1", "--port", str(port)]
    command += ["--num_workers", "1", "--telemetry", "False"]
    process = _launch(
        command,
        _peer_env(home),
        scratch / "litellm.log",
        lambda: _answers(embeddings, BODY, headers),
        "LiteLLM proxy",
    )
    return Server("litellm", process, url, {"minilm": (embeddings, BODY)}, headers)


def gateway_figure(home: Path, scratch: Path, plan: list[tuple[int, int, float]]) -> dict[str, Any]:
    """Direct, forgeml gateway and LiteLLM per (concurrency, rounds, seconds) of `plan`."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.gateway import create_key
    from forgeml.serve.deployments import delete, deploy

    workspace = Workspace(Settings(home=home, user="bench"))
    figure: dict[str, Any] = {"points": {}}
    try:
        replica = deploy(workspace, DEPLOYMENT, DEPLOYMENT, max_batch_size=32).replicas[0].url
        _, key = create_key(workspace, "bench-peers", scopes=[DEPLOYMENT])
        process, url = start_gateway(home, 1)
        auth = {"Authorization": f"Bearer {key}"}
        paths = {
            "direct": Server("direct", None, replica, _embeddings(replica), {}),
            "forgeml": Server("forgeml", process, url, _embeddings(url), auth),
        }
        try:
            missing = VENVS["litellm"].missing()
            if missing:
                figure["litellm_error"] = missing
            else:
                try:
                    paths["litellm"] = start_litellm(home, scratch, replica)
                except PeerError as error:
                    figure["litellm_error"] = str(error)
            try:
                for concurrency, rounds, seconds in plan:
                    figure["points"][f"c{concurrency}"] = _rounds(
                        paths, concurrency, rounds, seconds
                    )
            finally:
                if "litellm" in paths:
                    stop(paths["litellm"].process)
        finally:
            stop_server(process)
    finally:
        delete(workspace, DEPLOYMENT, grace_seconds=5.0)
        workspace.close()
    figure["ratios"] = _ratios(figure["points"])
    return figure


def _rounds(
    paths: dict[str, Server], concurrency: int, rounds: int, seconds: float
) -> dict[str, Any]:
    names = list(paths)
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            url, body = paths[name].requests["minilm"]
            found[name].append(measure(url, body, paths[name].headers, concurrency, seconds))
    point: dict[str, Any] = {"rounds": rounds, "seconds": seconds}
    for name, points in found.items():
        row = _medians(points)
        if name != "direct":
            pairs = list(zip(found["direct"], points, strict=True))
            row["added_p50_ms"] = statistics.median(p["p50_ms"] - d["p50_ms"] for d, p in pairs)
            row["rate_lost"] = 1 - statistics.median(p["rps"] / d["rps"] for d, p in pairs)
        point[name] = row
    return point


def _ratios(points: dict[str, Any]) -> dict[str, Any]:
    """Per concurrency: what each gateway adds and loses, and forgeml's share of LiteLLM's."""
    ratios: dict[str, Any] = {}
    for label, point in points.items():
        for path in ("forgeml", "litellm"):
            if path in point:
                ratios[f"{label}_{path}_added_p50_ms"] = point[path]["added_p50_ms"]
                ratios[f"{label}_{path}_rate_lost"] = point[path]["rate_lost"]
        if "litellm" in point:
            ours, theirs = point["forgeml"]["added_p50_ms"], point["litellm"]["added_p50_ms"]
            # a share only means something when LiteLLM adds time; the goal compares directly
            ratios[f"{label}_added_p50_forgeml_over_litellm"] = (
                ours / theirs if theirs > 0 else None
            )
            ratios[f"{label}_added_p50_under_a_tenth"] = ours < 0.1 * theirs
    return ratios


def _embeddings(base_url: str) -> dict[str, tuple[str, Any]]:
    return {"minilm": (f"{base_url}/v1/embeddings", BODY)}
