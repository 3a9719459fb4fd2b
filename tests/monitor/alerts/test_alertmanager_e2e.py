"""A team's own Prometheus and Alertmanager drive forgeml's alerts.

Debian's `prometheus` scrapes a real `forgeml serve` every second and evaluates a rule that
holds as soon as the server has answered a request (`for: 0s`); Debian's
`prometheus-alertmanager` (group_wait 0s) sends the alert to the webhook receiver of a
real `forgeml server --api-port`, and the alert lands in forgeml's store with source
`alertmanager`, where `forgeml alerts` and the pipeline triggers (`fired_since`) read it.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import fired_since
from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.serve.conftest import adult_records, wait_ready
from tests.train.conftest import (
    copy_home,
    forgeml_command,
    subprocess_env,
    trained_adult_template,
)

PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None or ALERTMANAGER is None,
        reason="prometheus or prometheus-alertmanager is missing (Debian's packages; "
        ".ci/run installs them)",
    ),
]

RULES = {
    "groups": [
        {
            "name": "e2e",
            "rules": [
                {
                    "alert": "ForgemlRequestsServed",
                    "expr": "sum by (model) (forgeml_requests_total) > 0",
                    "for": "0s",
                    "labels": {"severity": "info"},
                    "annotations": {"summary": "Model {{ $labels.model }} served {{ $value }}."},
                }
            ],
        }
    ]
}


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class _Processes:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.running: list[tuple[subprocess.Popen[bytes], Any]] = []

    def start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.logs / f"{name}.log").open("wb")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.running.append((process, log))

    def stop(self) -> None:
        for process, log in reversed(self.running):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            log.close()


def _migrate(home: Path) -> None:
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        assert workspace.store.engine is not None
    finally:
        workspace.close()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained Adult workspace (built once per session, shared with tests/serve)."""
    return trained_adult_template(tmp_path_factory)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[_Processes]:
    running = _Processes(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_an_alert_from_prometheus_and_alertmanager_reaches_forgeml(
    tmp_path: Path, trained: Path, processes: _Processes
) -> None:
    home = copy_home(trained, tmp_path / "home")
    _migrate(home)  # here, before two processes open the store at once
    env = subprocess_env(home)
    serve_port, api_port, am_port, prom_port = (free_port() for _ in range(4))
    serve_url = f"http://127.0.0.1:{serve_port}"
    api_url = f"http://127.0.0.1:{api_port}"
    processes.start(
        "serve", forgeml_command("serve", "adult-mlp@v1", "--port", str(serve_port)), env
    )
    processes.start("server", forgeml_command("server", "--api-port", str(api_port)), env)

    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump({
        "route": {"receiver": "forgeml", "group_wait": "0s", "group_interval": "1s",
                  "repeat_interval": "1h"},
        "receivers": [{"name": "forgeml", "webhook_configs": [
            {"url": f"{api_url}/api/v1/alertmanager", "send_resolved": True}]}],
    }))  # fmt: skip
    processes.start("alertmanager", [
        str(ALERTMANAGER), f"--config.file={tmp_path / 'alertmanager.yml'}",
        f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",
    ])  # fmt: skip
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(RULES))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "alerting": {"alertmanagers": [
            {"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [{"job_name": "forgeml-serve",
                            "static_configs": [{"targets": [f"127.0.0.1:{serve_port}"]}]}],
    }))  # fmt: skip
    processes.start("prometheus", [
        str(PROMETHEUS), f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
    ])  # fmt: skip

    wait_ready(serve_url, 120)
    wait_until(lambda: _answers(f"{api_url}/api/v1/alerts"), 60, "forgeml server's API", 0.1)
    wait_until(lambda: _answers(f"http://127.0.0.1:{am_port}/-/ready"), 60, "Alertmanager", 0.1)
    wait_until(lambda: _answers(f"http://127.0.0.1:{prom_port}/-/ready"), 60, "Prometheus", 0.1)
    body = {"instances": adult_records(2)}
    answer = httpx.post(f"{serve_url}/v1/models/adult-mlp:predict", json=body, timeout=30)
    assert answer.status_code == 200, answer.text

    def received() -> list[dict[str, Any]]:
        alerts = httpx.get(f"{api_url}/api/v1/alerts", params={"state": "firing"}, timeout=5)
        return [a for a in alerts.json()["alerts"] if a["rule"] == "ForgemlRequestsServed"]

    wait_until(received, 45, "the alert reaching forgeml through Alertmanager", 0.2)
    (alert,) = received()
    assert alert["source"] == "alertmanager"
    assert alert["labels"]["model"] == "adult-mlp"
    assert alert["labels"]["severity"] == "info"
    assert alert["annotations"]["summary"].startswith("Model adult-mlp served ")
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        assert [a.id for a in fired_since(workspace, 0)] == [alert["id"]]
    finally:
        workspace.close()
