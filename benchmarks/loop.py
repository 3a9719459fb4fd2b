"""Benchmark of issue 13's elastic scaling: a step in load to the added replica taking
traffic, and a cold start from zero, beside a plain `forgeml serve` start in the same run.

What is measured, on the Adult MLP (trained for 20 steps here), with real processes: the
replicas are `forgeml serve` processes, the requests go through a `forgeml gateway`
process (default options: it reloads its routes every 2 s), and the autoscaler is the loop
`forgeml server` runs (`serve_autoscaler`, one cycle a second), in this process with its
cool-downs shortened so that a repeat does not wait minutes for the scale-down:

- baseline: `forgeml serve adult-mlp` started by hand, from the process start to its first
  `:predict` answer (what any scale-out costs at least: interpreter, imports, model load);
- step: a deployment (min 1, max 2, target 1 request in flight per replica, 100 ms batch
  wait so each request stays in flight) under 1 client, then 6 clients from time 0: the
  time until the loop decides (an audit event), the new replica answers its health probe,
  and it has answered a request routed to it by the gateway;
- cold start: a deployment (min 0) scaled to zero, then one request through the gateway:
  the request's whole latency (the gateway's wait + the loop's start + the replica's first
  answer).

Medians over the repeats; errors are every non-200 answer the clients saw in the run.

    PYTHONPATH=src .venv/bin/python benchmarks/loop.py            # 5 repeats
    PYTHONPATH=src .venv/bin/python benchmarks/loop.py --quick    # 1 repeat
    PYTHONPATH=src .venv/bin/python benchmarks/loop.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from _adult import REPO, prepare_adult
from _cli import make_parser, print_json
from forgeml.core.workspace import Workspace
from forgeml.gateway import create_key
from forgeml.serve import _supervisor, deployments
from forgeml.serve.autoscale_loop import INTERVAL_S, scrape, serve_autoscaler
from serving import _child_env, _start, adult_rows, start_gateway, stop_server

TIMING = {"up_cooldown_s": 2.0, "down_window_s": 3.0, "idle_s": 3.0}
DRAIN_S = 3.0  # longer than the gateway's 2 s route reload
STEP, ZERO = "loop-step", "loop-zero"


def prepare(home: Path) -> Workspace:
    from forgeml.tracking.runner import run_training
    from forgeml.train.config import load_config

    workspace = prepare_adult(home)
    steps = ["max_steps=20", "epochs=null", "schedule.warmup_steps=0"]
    run_training(workspace, load_config(str(REPO / "examples/adult/train.yaml"), steps))
    return workspace


def baseline_start(home: Path) -> float:
    """Seconds from `forgeml serve adult-mlp` starting to its first :predict answer."""
    body = {"instances": adult_rows(1)}

    def answers(url: str) -> bool:
        try:
            return httpx.post(f"{url}/v1/models/adult-mlp:predict", json=body).status_code == 200
        except httpx.HTTPError:
            return False

    port = _supervisor.free_port()
    started = time.monotonic()
    command = _supervisor.server_command(["adult-mlp"], port)
    process, _ = _start(command, home, port, answers, "forgeml serve adult-mlp")
    elapsed = time.monotonic() - started
    stop_server(process)
    return elapsed


class Clients:
    """`count` threads posting :predict through the gateway until `stop`."""

    def __init__(self, url: str, key: str, name: str) -> None:
        self.url, self.key, self.name = url, key, name
        self.answers = self.errors = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def add(self, count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(target=self._send, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _send(self) -> None:
        body, headers = {"instances": adult_rows(1)}, {"authorization": f"Bearer {self.key}"}
        with httpx.Client(timeout=120) as client:
            while not self._stop.is_set():
                try:
                    ok = client.post(
                        f"{self.url}/v1/models/{self.name}:predict", json=body, headers=headers
                    ).status_code == 200  # fmt: skip
                except httpx.HTTPError:
                    ok = False
                with self._lock:
                    self.answers += ok
                    self.errors += not ok

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)


def _wait(predicate: Any, timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.02)
    return time.monotonic()


def _ready(workspace: Workspace, name: str) -> list[str]:
    replicas = deployments.get_deployment(workspace, name).replicas
    return [r.url for r in replicas if r.status == "ready"]


def _scales(workspace: Workspace, name: str) -> int:
    from sqlalchemy import func, select

    from forgeml.core.store import AuditEvent

    with workspace.store.session() as session:
        query = select(func.count()).where(
            AuditEvent.object_ref == name, AuditEvent.action == "deployment.scale"
        )
        return int(session.scalar(query) or 0)


def step_once(workspace: Workspace, url: str, key: str) -> dict[str, float]:
    """One step from 1 to 6 clients; seconds to the decision, the ready probe, the traffic."""
    _wait(lambda: len(_ready(workspace, STEP)) == 1, 120, "one replica")
    (first,) = _ready(workspace, STEP)
    clients = Clients(url, key, STEP)
    clients.add(1)
    try:
        _wait(lambda: clients.answers > 5, 60, "the first answers")
        decided = _scales(workspace, STEP)
        started = time.monotonic()
        clients.add(5)
        at_decision = _wait(lambda: _scales(workspace, STEP) > decided, 120, "a scale-up")
        at_ready = _wait(lambda: len(_ready(workspace, STEP)) == 2, 180, "the replica ready")
        (added,) = [u for u in _ready(workspace, STEP) if u != first]

        def served() -> bool:
            load = scrape(added)
            return load is not None and load.requests > 0

        at_traffic = _wait(served, 60, "traffic on the added replica")
    finally:
        clients.stop()
    return {
        "decision_s": at_decision - started,
        "ready_s": at_ready - started,
        "traffic_s": at_traffic - started,
        "errors": clients.errors,
        "answers": clients.answers,
    }


def cold_once(workspace: Workspace, url: str, key: str) -> dict[str, float]:
    """Wait for zero replicas, then time one request through the gateway."""
    _wait(lambda: deployments.get_deployment(workspace, ZERO).replicas == [], 120, "zero")
    started = time.monotonic()
    response = httpx.post(
        f"{url}/v1/models/{ZERO}:predict",
        json={"instances": adult_rows(1)},
        headers={"authorization": f"Bearer {key}"},
        timeout=300,
    )
    return {"cold_start_s": time.monotonic() - started, "errors": int(response.status_code != 200)}


def run(quick: bool) -> dict[str, Any]:
    repeats = 1 if quick else 5
    with tempfile.TemporaryDirectory(prefix="fml-loop-") as folder:
        home = Path(folder) / "home"
        workspace = prepare(home)
        os.environ.update(_child_env(home))  # replicas the loop starts work in `home`
        baseline = [baseline_start(home) for _ in range(repeats)]
        _, key = create_key(workspace, "bench")
        deployments.deploy(workspace, STEP, "adult-mlp", min_replicas=1, max_replicas=2,
                           target_inflight=1, max_wait_ms=100, max_batch_size=256,
                           ready_timeout=180)  # fmt: skip
        deployments.deploy(workspace, ZERO, "adult-mlp", min_replicas=0, max_replicas=1,
                           ready_timeout=180)  # fmt: skip
        gateway, url = start_gateway(home, 2)
        stop = threading.Event()
        options = {"drain_s": DRAIN_S, "timing": TIMING}
        loop = threading.Thread(
            target=serve_autoscaler, args=(workspace, INTERVAL_S, stop), kwargs=options
        )
        loop.start()
        try:
            steps = [step_once(workspace, url, key) for _ in range(repeats)]
            colds = [cold_once(workspace, url, key) for _ in range(repeats)]
        finally:
            stop.set()
            loop.join(60)
            stop_server(gateway)
            for name in (STEP, ZERO):
                deployments.delete(workspace, name)
            workspace.close()

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    return {
        "repeats": repeats,
        "baseline_serve_start_s": statistics.median(baseline),
        "step_decision_s": median(steps, "decision_s"),
        "step_replica_ready_s": median(steps, "ready_s"),
        "step_added_replica_traffic_s": median(steps, "traffic_s"),
        "cold_start_s": median(colds, "cold_start_s"),
        "errors": sum(row["errors"] for row in steps + colds),
        "answers": sum(row["answers"] for row in steps),
    }


def print_table(figures: dict[str, Any]) -> None:
    base = figures["baseline_serve_start_s"]
    rows = [
        ("baseline: forgeml serve start -> first answer", base),
        ("step in load -> scale-up decided", figures["step_decision_s"]),
        ("step in load -> added replica ready", figures["step_replica_ready_s"]),
        ("step in load -> added replica taking traffic", figures["step_added_replica_traffic_s"]),
        ("cold start from zero (request latency)", figures["cold_start_s"]),
    ]
    print(f"elastic scaling, median of {figures['repeats']} (s; x baseline)")
    for label, value in rows:
        print(f"  {label:<48} {value:7.2f}  {value / base:5.2f}x")
    print(f"  errors {figures['errors']} of {figures['answers'] + figures['errors']} requests")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = make_parser(__doc__, "1 repeat instead of 5")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    figures = run(args.quick)
    print_table(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
