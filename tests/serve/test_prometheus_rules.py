"""The shipped alert rules in a real Prometheus, scraping a real model server.

promtool's unit tests (tests/monitor/) prove each rule's logic on written series; this
proves the rules and the server agree: Debian's `prometheus` scrapes a live server every
second and evaluates forgeml's rule file as `forgeml monitor rules` prints it (only each
rule's `for:` hold shortened), and the latency rule fires for the model whose objective
its requests miss, while the error-rate rule stays silent.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from forgeml.monitor.assets import rules_text
from forgeml.serve import ServeOptions
from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.serve.conftest import LiveServer, adult_records, open_home

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="prometheus is missing (Debian's prometheus package; .ci/run installs it)",
    ),
]


@pytest.fixture(scope="module")
def server(served_home: Path) -> Iterator[LiveServer]:
    # an objective of 1 us: every request misses it
    workspace = open_home(served_home)
    live = LiveServer(workspace, ["adult-mlp@v1"], ServeOptions(latency_objective_ms=0.001))
    yield live.start()
    live.stop()
    workspace.close()


@pytest.fixture
def prometheus(server: LiveServer, tmp_path: Path) -> Iterator[str]:
    rules = yaml.safe_load(rules_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("for", None)  # fire on the first evaluation that holds
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "scrape_configs": [
            {"job_name": "forgeml-serve", "static_configs": [{"targets": [server.url[7:]]}]}
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/-/ready"), 60, "Prometheus being ready", 0.2)
        yield url
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _alerts(url: str) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = httpx.get(f"{url}/api/v1/alerts", timeout=5).json()["data"][
        "alerts"
    ]
    return alerts


def test_the_latency_rule_fires_for_a_real_server_missing_its_objective(
    server: LiveServer, prometheus: str
) -> None:
    stop = threading.Event()

    def send() -> None:
        with httpx.Client(timeout=10) as client:
            while not stop.is_set():
                body = {"instances": adult_records(1)}
                client.post(f"{server.url}/v1/models/adult-mlp:predict", json=body)
                stop.wait(0.05)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:

        def firing() -> bool:
            return any(
                alert["labels"]["alertname"] == "ForgemlLatencyObjectiveMissed"
                and alert["labels"].get("model") == "adult-mlp"
                and alert["state"] == "firing"
                for alert in _alerts(prometheus)
            )

        wait_until(firing, 90, "ForgemlLatencyObjectiveMissed firing for adult-mlp", 0.5)
    finally:
        stop.set()
        sender.join(15)
    names = {alert["labels"]["alertname"] for alert in _alerts(prometheus)}
    assert "ForgemlErrorRateHigh" not in names  # every request answered 200
    # the objective Prometheus scraped is the server's own
    query = httpx.get(
        f"{prometheus}/api/v1/query",
        params={"query": 'forgeml_latency_objective_seconds{model="adult-mlp"}'},
        timeout=5,
    ).json()["data"]["result"]
    assert [float(sample["value"][1]) for sample in query] == [1e-06]
