from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import func, select

from forgeml.core.errors import ConfigError
from forgeml.core.store import AlertDeliveryRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import (
    AlertEvaluator,
    SampleStore,
    WebhookMessage,
    build_channels,
    labels_of,
    load_config,
    parse_rules,
)
from forgeml.serve._supervisor import free_port
from tests.monitor.alerts.conftest import FakeClock

RULES = """
groups:
  - name: test
    rules:
      - alert: Broken
        expr: max by (model) (errors) > 0
        labels: {severity: critical}
        annotations: {summary: "{{ $labels.model }} fails"}
"""


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]
    status = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append(json.loads(body))  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.received = []  # type: ignore[attr-defined]
    server.status = 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: object, session: object, envelope: Any) -> str:  # noqa: N802
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Controller, _Inbox]]:
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, inbox
    controller.stop()


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "alerts.yml"
    path.write_text(text)
    return path


def _evaluator(
    workspace: Workspace, config: Path, samples: SampleStore, clock: FakeClock
) -> AlertEvaluator:
    loaded = load_config(config)
    return AlertEvaluator(
        workspace, parse_rules(RULES, "t.yml"), samples=samples, clock=clock,
        scrape_replicas=False, channels=build_channels(loaded), external_url=loaded.external_url,
    )  # fmt: skip


def _errors(samples: SampleStore, clock: FakeClock, value: float) -> None:
    samples.ingest("t", [(labels_of({"__name__": "errors", "model": "m"}), value)], clock())


def _deliveries(workspace: Workspace) -> int:
    with workspace.store.session() as session:
        return int(session.scalar(select(func.count()).select_from(AlertDeliveryRecord)) or 0)


def test_the_webhook_gets_alertmanagers_v4_payload_once_per_change(
    workspace: Workspace, clock: FakeClock, hook: ThreadingHTTPServer, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{hook.server_port}/hook"
    config = _config(
        tmp_path, f"external_url: http://forgeml.test\nchannels:\n"
        f"  - {{name: hook, type: webhook, url: '{url}', allow_private: true}}\n"
        "  - {name: logs, type: log}\n",
    )  # fmt: skip
    samples = SampleStore()
    evaluator = _evaluator(workspace, config, samples, clock)
    _errors(samples, clock, 3)
    evaluator.cycle()
    received = hook.received  # type: ignore[attr-defined]
    assert len(received) == 1
    message = WebhookMessage.model_validate(received[0])  # the receiver's own model
    assert (message.version, message.status, message.receiver) == ("4", "firing", "hook")
    assert message.externalURL == "http://forgeml.test"
    (alert,) = message.alerts
    assert alert.labels == {"alertname": "Broken", "model": "m", "severity": "critical"}
    assert alert.annotations == {"summary": "m fails"}
    assert len(alert.fingerprint) == 16
    assert received[0]["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert set(received[0]) == {
        "version", "groupKey", "truncatedAlerts", "status", "receiver", "groupLabels",
        "commonLabels", "commonAnnotations", "externalURL", "alerts",
    }  # fmt: skip
    # a restarted server does not send it again
    clock.advance(60)
    _errors(samples, clock, 3)
    _evaluator(workspace, config, samples, clock).cycle()
    assert len(received) == 1
    clock.advance(60)
    _errors(samples, clock, 0)
    evaluator.cycle()
    assert [m["status"] for m in received] == ["firing", "resolved"]
    assert received[1]["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z"
    assert _deliveries(workspace) == 4  # two channels x firing, resolved


def test_a_failing_channel_is_retried_and_never_stops_evaluation(
    workspace: Workspace, clock: FakeClock, hook: ThreadingHTTPServer, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{hook.server_port}/hook"
    config = _config(
        tmp_path,
        "channels:\n  - {name: dead, type: webhook, allow_private: true, "
        f"url: 'http://127.0.0.1:{free_port()}/'}}\n"
        f"  - {{name: hook, type: webhook, url: '{url}', allow_private: true}}\n",
    )  # fmt: skip
    hook.status = 500  # type: ignore[attr-defined]
    samples = SampleStore()
    evaluator = _evaluator(workspace, config, samples, clock)
    _errors(samples, clock, 3)
    assert [t.state for t in evaluator.cycle()] == ["firing"]  # evaluation went on
    assert _deliveries(workspace) == 0
    hook.status = 200  # type: ignore[attr-defined]
    clock.advance(60)
    _errors(samples, clock, 3)
    evaluator.cycle()
    assert _deliveries(workspace) == 1  # the webhook, retried; the dead channel still failing
    assert len(hook.received) == 2  # type: ignore[attr-defined]  # refused once, then taken


def test_email_reaches_a_real_smtp_server(
    workspace: Workspace, clock: FakeClock, smtp: tuple[Controller, _Inbox], tmp_path: Path
) -> None:
    controller, inbox = smtp
    config = _config(
        tmp_path, "channels:\n  - {name: mail, type: email, smtp_host: 127.0.0.1, "
        f"smtp_port: {controller.port}, sender: forgeml@example.org, to: [oncall@example.org]}}\n",
    )  # fmt: skip
    samples = SampleStore()
    evaluator = _evaluator(workspace, config, samples, clock)
    _errors(samples, clock, 3)
    evaluator.cycle()
    (rcpt, message) = inbox.messages[0]
    assert rcpt == ["oncall@example.org"]
    assert message["Subject"].startswith("[FIRING] Broken")
    assert "summary: m fails" in message.get_payload()
    clock.advance(60)
    _errors(samples, clock, 3)
    evaluator.cycle()
    assert len(inbox.messages) == 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("channels:\n  - {name: a, type: pager}\n", "channels.0"),
        ("channels:\n  - {name: a, type: webhook, url: ftp://x}\n", "url"),
        ("channels:\n  - {name: a, type: log}\n  - {name: a, type: log}\n", "share a name"),
        ("channels: [\n", "not valid YAML"),
    ],
)
def test_a_bad_alert_config_is_one_sentence(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_config(_config(tmp_path, text))
