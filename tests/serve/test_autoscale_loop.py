from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.core.store import DeploymentReplicaRecord
from forgeml.core.workspace import Workspace
from forgeml.gateway import GatewayOptions, create_app, create_key
from forgeml.serve import _supervisor, deployments
from forgeml.serve.autoscale_loop import Autoscaler, scrape
from forgeml.serve.deployments import _replicas
from tests._wait import FakeClock, wait_until
from tests.gateway.conftest import ServerThread
from tests.serve.test_deployments import adult_records, alive, kill_servers, server_pids
from tests.train.conftest import copy_home, trained_adult_template

RAMP, ZERO, SERVED, NOBODY = "auto-ramp", "auto-zero", "auto-server", "auto-nobody"
pytestmark = pytest.mark.timeout(600)
# the cool-downs run on the test's fake clock; only drains and starts take real time
TIMING = {"up_cooldown_s": 2.0, "down_window_s": 10.0, "idle_s": 20.0}
GATEWAY = GatewayOptions(refresh_s=0.2, key_cache_ttl_s=60, cold_start_timeout_s=180)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    home = copy_home(
        trained_adult_template(tmp_path_factory), tmp_path_factory.mktemp("autoscale") / "home"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        opened = Workspace(Settings(home=home, user="tester"))
        try:
            yield opened
        finally:
            for name in (RAMP, ZERO, SERVED, NOBODY):
                kill_servers(name)
            opened.close()


@pytest.fixture(scope="module")
def gateway(workspace: Workspace) -> Iterator[tuple[str, Any, str]]:
    """A real gateway over the workspace: (its URL, its Gateway object, an API key)."""
    _, key = create_key(workspace, "autoscale-test")
    app = create_app(workspace, GATEWAY)
    server = ServerThread(app)
    try:
        yield server.url, app.state.gateway, key
    finally:
        server.stop()


def rows(workspace: Workspace, name: str, status: str) -> list[deployments.Replica]:
    deployment = deployments.get_deployment(workspace, name)
    return [r for r in deployment.replicas if r.status == status]


def stepper(
    scaler: Autoscaler, clock: FakeClock, workspace: Workspace, gateway: Any, name: str
) -> Callable[[], None]:
    """One cycle, after the fake clock moves 1 s; a replica draining is let go only once
    the gateway's routes no longer hold it (real gateways: the drain outlasts a refresh)."""

    def step() -> None:
        draining = {r.url for r in rows(workspace, name, _replicas.DRAINING)}
        if draining:
            wait_until(
                lambda: not draining & set(gateway.routes[name].primary),
                what="the gateway dropping the draining replicas",
            )
        clock.advance(1.0)
        scaler.cycle()

    return step


def stop_all_replicas(workspace: Workspace, name: str) -> None:
    """Stop every replica and drop its row, as the loop does when it scales to zero."""
    with workspace.store.session() as session:
        found = session.scalars(select(DeploymentReplicaRecord)).all()
        owned = [(r.id, r.pid, r.port) for r in found if r.pid in server_pids(name)]
    for row_id, pid, port in owned:
        _supervisor.stop([(pid, port)])
        _replicas.remove(workspace, name, row_id)


class Load:
    """`clients` threads posting :predict through the gateway until stopped."""

    def __init__(self, url: str, key: str, name: str, clients: int) -> None:
        self.statuses: list[int] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._send, args=(url, key, name), daemon=True)
            for _ in range(clients)
        ]
        for thread in self._threads:
            thread.start()

    def _send(self, url: str, key: str, name: str) -> None:
        body = {"instances": adult_records(1)}
        headers = {"authorization": f"Bearer {key}"}
        with httpx.Client(timeout=60) as client:
            while not self._stop.is_set():
                try:
                    response = client.post(
                        f"{url}/v1/models/{name}:predict", json=body, headers=headers
                    )
                except httpx.HTTPError as error:
                    with self._lock:
                        self.failures.append(repr(error))
                    continue
                with self._lock:
                    self.statuses.append(response.status_code)
                    if response.status_code != 200:
                        self.failures.append(response.text)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


@pytest.mark.slow
def test_replicas_rise_under_load_then_fall_with_no_failed_request(
    workspace: Workspace, gateway: tuple[str, Any, str]
) -> None:
    url, routes, key = gateway
    # each request waits up to 150 ms for a batch: in flight ~= the clients sending
    deployments.deploy(
        workspace, RAMP, "adult-mlp@v1", min_replicas=1, max_replicas=3, target_inflight=1.0,
        max_wait_ms=150, max_batch_size=256, ready_timeout=180,
    )  # fmt: skip
    clock = FakeClock()
    scaler = Autoscaler(workspace, clock=clock, drain_s=3.0, timing=TIMING)
    step = stepper(scaler, clock, workspace, routes, RAMP)
    first = rows(workspace, RAMP, "ready")[0].url
    # the gateway learns of a new deployment at its next route reload (every refresh_s):
    # a request sent before it would be a 404 that has nothing to do with scaling
    wait_until(lambda: RAMP in routes.routes, what="the gateway routing the deployment")

    heavy = Load(url, key, RAMP, clients=6)
    try:
        wait_until(lambda: len(heavy.statuses) >= 10, timeout=60, what="the first answers")

        def grown() -> bool:
            step()
            return len(rows(workspace, RAMP, "ready")) == 3

        wait_until(grown, timeout=300, interval=0.2, what="three ready replicas")
        added = [r.url for r in rows(workspace, RAMP, "ready") if r.url != first]
        for replica in added:  # each added replica takes traffic through the gateway

            def served(replica: str = replica) -> bool:
                load = scrape(replica)
                return load is not None and load.requests > 0

            wait_until(served, timeout=60, what=f"traffic reaching {replica}")
    finally:
        heavy.stop()
    light = Load(url, key, RAMP, clients=1)  # in flight <= 1: one replica is enough
    try:

        def shrunk() -> bool:
            step()
            replicas = deployments.get_deployment(workspace, RAMP).replicas
            return [r.status for r in replicas] == ["ready"]

        wait_until(shrunk, timeout=300, interval=0.2, what="back to one replica")
        wait_until(lambda: len(light.statuses) >= 5, timeout=60, what="answers after the fall")
    finally:
        light.stop()
    assert heavy.failures == [] and light.failures == []
    assert set(heavy.statuses) == {200} and set(light.statuses) == {200}
    assert len(server_pids(RAMP)) == 1
    with workspace.store.session() as session:
        from forgeml.core.store import AuditEvent

        scaled = session.scalars(
            select(AuditEvent).where(
                AuditEvent.object_ref == RAMP, AuditEvent.action == "deployment.scale"
            )
        ).all()
        moves = [(event.payload["from"], event.payload["to"]) for event in scaled]
    assert moves[0][1] > moves[0][0] and moves[-1][1] < moves[-1][0]


@pytest.mark.slow
def test_scaled_to_zero_then_a_request_through_the_gateway_cold_starts(
    workspace: Workspace, gateway: tuple[str, Any, str]
) -> None:
    url, routes, key = gateway
    deployed = deployments.deploy(
        workspace, ZERO, "adult-mlp@v1", min_replicas=0, max_replicas=2, ready_timeout=180
    )
    pid = deployed.replicas[0].pid
    assert pid is not None
    clock = FakeClock()
    scaler = Autoscaler(workspace, clock=clock, drain_s=3.0, timing=TIMING)
    step = stepper(scaler, clock, workspace, routes, ZERO)

    def at_zero() -> bool:
        step()
        return deployments.get_deployment(workspace, ZERO).replicas == []

    wait_until(at_zero, timeout=120, interval=0.05, what="zero replicas")
    assert deployments.get_deployment(workspace, ZERO).status == "idle"
    assert not alive(pid)

    answer: dict[str, httpx.Response] = {}

    def call() -> None:
        answer["r"] = httpx.post(
            f"{url}/v1/models/{ZERO}:predict",
            json={"instances": adult_records(2)},
            headers={"authorization": f"Bearer {key}"},
            timeout=240,
        )

    caller = threading.Thread(target=call)
    caller.start()
    try:
        wait_until(
            lambda: rows(workspace, ZERO, _replicas.WANTED), timeout=30, what="the wanted row"
        )

        def answered() -> bool:
            step()
            return "r" in answer

        wait_until(answered, timeout=240, interval=0.2, what="the cold-started answer")
    finally:
        caller.join(timeout=240)
    response = answer["r"]
    assert response.status_code == 200, response.text
    assert len(response.json()["predictions"]) == 2
    assert [r.status for r in deployments.get_deployment(workspace, ZERO).replicas] == ["ready"]
    assert deployments.get_deployment(workspace, ZERO).status == "ready"
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert f'forgeml_gateway_cold_start_seconds_count{{deployment="{ZERO}"}} 1.0' in metrics


@pytest.mark.slow
def test_a_cold_start_with_no_autoscaler_running_ends_in_503_with_retry_after(
    workspace: Workspace,
) -> None:
    name = NOBODY
    deployments.deploy(
        workspace, name, "adult-mlp@v1", min_replicas=0, max_replicas=1, ready_timeout=180
    )
    stop_all_replicas(workspace, name)
    _, key = create_key(workspace, "impatient")
    options = GATEWAY.model_copy(update={"cold_start_timeout_s": 0.5})
    server = ServerThread(create_app(workspace, options))
    try:
        response = httpx.post(
            f"{server.url}/v1/models/{name}:predict",
            json={"instances": adult_records(1)},
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        )
    finally:
        server.stop()
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert "scaled to zero" in response.json()["error"]
    wanted = rows(workspace, name, _replicas.WANTED)
    assert len(wanted) == 1  # the request asked once, however long it waited
    assert server_pids(name) == []


@pytest.mark.slow
def test_forgeml_server_runs_the_loop_that_cold_starts_a_deployment_at_zero(
    workspace: Workspace, gateway: tuple[str, Any, str], tmp_path: Path
) -> None:
    url, routes, key = gateway
    deployments.deploy(
        workspace, SERVED, "adult-mlp@v1", min_replicas=0, max_replicas=1, ready_timeout=180
    )
    stop_all_replicas(workspace, SERVED)
    # the gateway's routes refresh every 0.2 s: until then they name the stopped replica
    wait_until(
        lambda: SERVED in routes.routes and not routes.routes[SERVED].primary,
        30,
        "the gateway dropping the stopped replica",
    )
    env = os.environ | {"FORGEML_HOME": str(workspace.settings.home), "FORGEML_USER": "tester"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "forgeml.cli", "server", "--interval", "0.5"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        response = httpx.post(
            f"{url}/v1/models/{SERVED}:predict",
            json={"instances": adult_records(1)},
            headers={"authorization": f"Bearer {key}"},
            timeout=240,
        )
    finally:
        server.terminate()
        server.wait(60)
    assert response.status_code == 200, (response.text, log.read_text())
    assert server.returncode == 0, log.read_text()
    replicas = deployments.get_deployment(workspace, SERVED).replicas
    assert [r.status for r in replicas] == ["ready"]
    assert server_pids(SERVED) == [replicas[0].pid]  # it outlives the server, like a job


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_replicas": 3, "max_replicas": 2}, "cannot be more than --max-replicas"),
        ({"min_replicas": -1, "max_replicas": 2}, "0 or more"),
        ({"min_replicas": 0, "max_replicas": 0}, "at least 1"),
        ({"min_replicas": 1}, "both --min-replicas and --max-replicas"),
        ({"target_inflight": 2.0}, "needs replica bounds"),
        (
            {"min_replicas": 1, "max_replicas": 2, "target_inflight": 2, "target_p99_ms": 100},
            "Choose one",
        ),
        ({"min_replicas": 1, "max_replicas": 2, "target_inflight": 0}, "more than 0"),
        ({"min_replicas": 1, "max_replicas": 2, "target_p99_ms": -5}, "more than 0"),
    ],
)
def test_bad_autoscale_options_are_refused_and_record_nothing(
    workspace: Workspace, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        deployments.deploy(workspace, "auto-bad", "adult-mlp@v1", **options)
    with pytest.raises(NotFoundError):
        deployments.get_deployment(workspace, "auto-bad")
    assert server_pids("auto-bad") == []


def test_the_spec_records_the_bounds_and_starts_within_them(workspace: Workspace) -> None:
    spec = deployments.build_spec(
        workspace, "adult-mlp@v1", replicas=1, min_replicas=2, max_replicas=4, target_p99_ms=250
    )
    assert spec.replicas == 2  # the starting count is raised to the minimum
    assert spec.autoscale is not None
    assert spec.autoscale.model_dump() == {
        "min_replicas": 2, "max_replicas": 4, "target_inflight": None, "target_p99_ms": 250.0,
    }  # fmt: skip
    zero = deployments.build_spec(workspace, "adult-mlp@v1", min_replicas=0, max_replicas=3)
    assert zero.replicas == 1 and zero.autoscale is not None
    assert zero.autoscale.target_inflight == 4.0  # the default target


def test_requesting_a_replica_of_an_unknown_deployment_is_not_found(workspace: Workspace) -> None:
    with pytest.raises(NotFoundError):
        deployments.request_replica(workspace, "nowhere")
