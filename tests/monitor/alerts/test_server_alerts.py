"""`forgeml server` evaluates alert rules itself: a real server process scrapes a real
/metrics target, fires a rule, posts the webhook, survives a restart without firing or
sending twice, and resolves the alert when the series falls."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._state import as_utc
from forgeml.serve._supervisor import free_port
from tests._wait import wait_until
from tests.train.conftest import forgeml_command, subprocess_env

pytestmark = pytest.mark.slow


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append(json.loads(body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


@pytest.fixture
def target() -> Iterator[tuple[str, Gauge]]:
    registry = CollectorRegistry()
    depth = Gauge("test_queue_depth", "Requests waiting.", ["model"], registry=registry)
    depth.labels("m").set(5)
    server, thread = start_http_server(0, "127.0.0.1", registry)
    yield f"http://127.0.0.1:{server.server_port}/metrics", depth
    server.shutdown()
    server.server_close()
    thread.join(10)


def _start(home: Path, config: Path, api_port: int, log: Path) -> subprocess.Popen[bytes]:
    command = forgeml_command("server", "--alert-config", str(config), "--api-port", str(api_port))
    with log.open("ab") as output:  # the child keeps its own descriptor
        return subprocess.Popen(
            command, env=subprocess_env(home), stdout=output, stderr=subprocess.STDOUT
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0


def _rows(home: Path) -> list[AlertRecord]:
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        with workspace.store.session() as session:
            return list(session.scalars(select(AlertRecord).where(AlertRecord.rule == "Deep")))
    finally:
        workspace.close()


def _alerts(api: str) -> list[dict[str, Any]]:
    try:
        return httpx.get(f"{api}/api/v1/alerts?state=all", timeout=5).json()["alerts"]  # type: ignore[no-any-return]
    except httpx.HTTPError:
        return []


def test_the_server_fires_sends_survives_a_restart_and_resolves(
    tmp_path: Path, hook: ThreadingHTTPServer, target: tuple[str, Gauge]
) -> None:
    url, depth = target
    (tmp_path / "rules.yml").write_text(
        "groups:\n  - name: t\n    rules:\n      - alert: Deep\n"
        "        expr: max by (model) (test_queue_depth) > 3\n"
        "        annotations: {summary: '{{ $labels.model }} holds {{ $value }}'}\n"
    )
    config = tmp_path / "alerts.yml"
    config.write_text(
        f"interval_s: 0.2\nrule_files: [rules.yml]\ntargets: ['{url}']\n"
        "scrape_allow_private: true\nchannels:\n"
        "  - {name: hook, type: webhook, allow_private: true, "
        f"url: 'http://127.0.0.1:{hook.server_port}/'}}\n"
    )
    home = tmp_path / "home"
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    received: list[dict[str, Any]] = hook.received  # type: ignore[attr-defined]
    process = _start(home, config, api_port, tmp_path / "server.log")
    try:
        wait_until(lambda: received, 60, "the firing webhook", 0.05)
        (alert,) = [a for a in _alerts(api) if a["rule"] == "Deep"]
        assert (alert["state"], alert["source"]) == ("firing", "forgeml")
        assert alert["annotations"] == {"summary": "m holds 5"}
        assert received[0]["alerts"][0]["labels"] == {"alertname": "Deep", "model": "m"}
        _stop(process)
        restarted = datetime.now(UTC)
        process = _start(home, config, api_port, tmp_path / "server.log")
        # the restarted server evaluates the alert again (its row is refreshed) ...
        wait_until(
            lambda: as_utc(_rows(home)[0].updated_at) > restarted, 60, "a cycle after restart"
        )
        # ... without a second row or a second notification
        assert len(_rows(home)) == 1
        assert len(received) == 1
        depth.labels("m").set(0)
        wait_until(lambda: len(received) == 2, 60, "the resolved webhook", 0.05)
        assert received[1]["status"] == "resolved"
        assert [row.state for row in _rows(home)] == ["resolved"]
    finally:
        if process.poll() is None:
            _stop(process)
    assert len(received) == 2
