"""The serving and gateway figures of `benchmarks/peers.py`.

Serving: `forgeml serve` against Ray Serve and BentoML, each holding the same two
registered models (Adult MLP, SST-2 MiniLM) through forgeml's own loading and encoding
code (`_peers/model.py`), each batching at most 32 rows with no added wait. The three
servers are up throughout (the peers take tens of seconds to start), and forgeml's and a
peer's load points alternate round by round, so a slow spell of this shared machine falls
on both; the load generator is benchmarks/serving.py's (aiohttp in a second process,
closed loop; open loop for the sustained rate).

Gateway: one forgeml replica of MiniLM (`forgeml deploy`), reached directly, through
`forgeml gateway` and through LiteLLM's proxy (`openai/` provider on the replica's
`/v1`), the three in rotating order each round: "added" is the median of per-round
differences from the direct p50, "rate lost" one minus the median per-round ratio of
requests/s at saturation (concurrency 8).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from _adult import REPO
from peers_setup import OFFLINE_ENV, VENVS
from serving import (
    TEXT,
    adult_rows,
    measure,
    start_server,
    stop_server,
    sustained_rate,
    target,
)

PEERS_DIR = REPO / "benchmarks" / "_peers"


class PeerError(RuntimeError):
    """A peer could not start here; the message says why (its own last log lines)."""


@dataclass
class Server:
    """A running server: its process, base URL and how to build each model's request."""

    name: str
    process: subprocess.Popen[bytes] | None  # None: a server someone else runs
    url: str
    requests: dict[str, tuple[str, Any]]  # kind -> (URL, body)
    headers: dict[str, str]


def _peer_env(home: Path) -> dict[str, str]:
    env = {**os.environ, **OFFLINE_ENV, "FORGEML_HOME": str(home)}
    env["PYTHONPATH"] = f"{REPO / 'src'}:{PEERS_DIR}"
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _launch(
    command: list[str],
    env: dict[str, str],
    log: Path,
    ready: Callable[[], bool],
    what: str,
    cwd: Path | None = None,
    timeout_s: float = 300.0,
) -> subprocess.Popen[bytes]:
    """Start `command`, logging to `log`; return once `ready()`, else raise PeerError."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if ready():
            return process
        time.sleep(0.5)
    code = process.poll()
    stop(process)
    lines = log.read_text(errors="replace").strip().splitlines()
    reason = " | ".join(line.strip() for line in lines[-12:]) or "no output"
    state = f"exited with {code}" if code is not None else f"not ready in {timeout_s:.0f} s"
    raise PeerError(f"{what} {state}: {reason}")


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """Stop a server and the processes it started (its own session)."""
    if process is not None and process.poll() is None:
        try:
            os.killpg(process.pid, 15)
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(10)
        except ProcessLookupError:
            pass


def _answers(url: str, body: Any, headers: dict[str, str] | None = None) -> bool:
    try:
        return httpx.post(url, json=body, headers=headers, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _adult_body() -> dict[str, Any]:
    return {"instances": adult_rows(1)}


def _minilm_body() -> dict[str, Any]:
    return {"model": "sst2-minilm", "input": TEXT}


def start_forgeml(home: Path) -> Server:
    process, url = start_server(home, "adult-mlp", "sst2-minilm", "--max-batch-size", "32")
    requests = {kind: target(kind, url, name)[1:] for kind, name in _NAMES.items()}
    return Server("forgeml", process, url, requests, {})


_NAMES = {"adult": "adult-mlp", "minilm": "sst2-minilm"}


def start_ray_serve(home: Path, scratch: Path) -> Server:
    from forgeml.serve._supervisor import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    requests = {
        "adult": (f"{url}/adult", _adult_body()),
        "minilm": (f"{url}/minilm", _minilm_body()),
    }

    def ready() -> bool:
        return all(_answers(u, b) for u, b in requests.values())

    command = [str(VENVS["peers"].python), str(PEERS_DIR / "ray_server.py"), str(home), str(port)]
    process = _launch(command, _peer_env(home), scratch / "ray-serve.log", ready, "Ray Serve")
    return Server("ray_serve", process, url, requests, {})


def start_bentoml(home: Path, scratch: Path) -> Server:
    from forgeml.serve._supervisor import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    requests = {
        "adult": (f"{url}/predict", _adult_body()),
        "minilm": (f"{url}/embeddings", {"input": [TEXT]}),
    }

    def ready() -> bool:
        return all(_answers(u, b) for u, b in requests.values())

    bentoml = VENVS["peers"].python.parent / "bentoml"
    command = [str(bentoml), "serve", "bento_service:Peers", "--host", "127.0.0.1"]
    command += ["--port", str(port)]
    env = _peer_env(home)
    process = _launch(command, env, scratch / "bentoml.log", ready, "BentoML", cwd=PEERS_DIR)
    return Server("bentoml", process, url, requests, {})


PEER_SERVERS: dict[str, Callable[[Path, Path], Server]] = {
    "ray_serve": start_ray_serve,
    "bentoml": start_bentoml,
}


def _point(server: Server, kind: str, concurrency: int, seconds: float) -> dict[str, Any]:
    url, body = server.requests[kind]
    return measure(url, body, server.headers, concurrency, seconds)


def serving_figure(home: Path, scratch: Path, rounds: int, seconds: float) -> dict[str, Any]:
    """forgeml serve against each peer server: rates and p50 at concurrency 1 and 16, and
    the highest sustained open-loop rate (probes of `seconds` each).

    The peers start together (Ray Serve and BentoML take tens of seconds each) and stay up
    while each is measured against forgeml, so every pair of points runs beside the same
    idle servers.
    """
    figure: dict[str, Any] = {"rounds": rounds, "seconds": seconds, "peers": {}}
    missing = VENVS["peers"].missing()
    started: dict[str, Server] = {}
    ours: Server | None = None
    try:
        with ThreadPoolExecutor(len(PEER_SERVERS) + 1) as pool:
            ours_future = pool.submit(start_forgeml, home)
            futures = {} if missing else {
                peer: pool.submit(start, home, scratch) for peer, start in PEER_SERVERS.items()
            }  # fmt: skip
            for peer, future in futures.items():
                try:
                    started[peer] = future.result()
                except PeerError as error:
                    figure["peers"][peer] = {"error": str(error)}
            ours = ours_future.result()
        for peer in PEER_SERVERS:
            if missing:
                figure["peers"][peer] = {"error": missing}
            elif peer in started:
                figure["peers"][peer] = _paired(ours, started[peer], rounds, seconds)
    finally:
        for server in started.values():
            stop(server.process)
        if ours is not None and ours.process is not None:
            stop_server(ours.process)
    return figure


def _paired(ours: Server, theirs: Server, rounds: int, seconds: float) -> dict[str, Any]:
    """Each (model, concurrency) point on both servers, alternating who goes first."""
    points: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for index in range(rounds):
        for kind in _NAMES:
            for concurrency in (1, 16):
                pair = (ours, theirs) if index % 2 == 0 else (theirs, ours)
                for server in pair:
                    found = _point(server, kind, concurrency, seconds)
                    points.setdefault((kind, concurrency, server.name), []).append(found)
    result: dict[str, Any] = {}
    for kind in _NAMES:
        per_kind: dict[str, Any] = {}
        for concurrency in (1, 16):
            sides = {s.name: _medians(points[(kind, concurrency, s.name)]) for s in (ours, theirs)}
            rate_ratio = sides[ours.name]["rps"] / max(sides[theirs.name]["rps"], 1e-9)
            per_kind[f"c{concurrency}"] = {**sides, "rate_ratio": rate_ratio}
        per_kind["sustained"] = {
            s.name: _sustained(s, kind, points, seconds) for s in (ours, theirs)
        }
        result[kind] = per_kind
    return result


def _sustained(
    server: Server,
    kind: str,
    points: dict[tuple[str, int, str], list[dict[str, Any]]],
    seconds: float,
) -> dict[str, Any]:
    closed = [{"concurrency": c, **_medians(points[(kind, c, server.name)])} for c in (1, 16)]
    url, body = server.requests[kind]
    rate, probes = sustained_rate(url, body, closed, seconds)
    return {"rate": rate, "probes": len(probes)}


def _medians(points: list[dict[str, Any]]) -> dict[str, Any]:
    found = {k: statistics.median(p[k] for p in points) for k in ("rps", "p50_ms", "p99_ms")}
    return {**found, "errors": sum(p["errors"] for p in points)}
