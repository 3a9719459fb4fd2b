"""Alerts from a real Alertmanager: its webhook (v4) recorded as forgeml alerts.

A firing alert opens (or refreshes) an active row with source `alertmanager`, keyed by
Alertmanager's fingerprint, so Alertmanager's repeats (`repeat_interval`, a resend after
a restart) refresh one row instead of adding another; a resolved alert resolves it. The
whole message is validated before anything is written and recorded in one transaction.

The receiver serves the whole install (Alertmanager's webhook is one URL): whatever project
its caller acts in, each new alert is filed in the project of the subject its labels name
(`_subjects.alert_project`: a deployment, a served model, a dataset; else `default`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select

from forgeml.core.errors import InvalidDataError
from forgeml.core.ids import new_id
from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._payload import WebhookAlert, WebhookMessage
from forgeml.monitor.alerts._state import ALERTMANAGER, PENDING, fingerprint, fire, resolve
from forgeml.monitor.alerts._subjects import alert_project


@dataclass(frozen=True)
class Received:
    """What one message changed: alerts opened, refreshed, resolved, ignored."""

    opened: int = 0
    refreshed: int = 0
    resolved: int = 0
    ignored: int = 0


def parse_message(payload: Any) -> WebhookMessage:
    """Validate an Alertmanager webhook body.

    Raises:
        InvalidDataError: not a version-4 webhook message (one sentence, naming the field).
    """
    try:
        return WebhookMessage.model_validate(payload)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the body"
        raise InvalidDataError(
            f"Not an Alertmanager webhook message (version 4): {where}: {first['msg']}."
        ) from None


def receive(workspace: Workspace, message: WebhookMessage, now: datetime | None = None) -> Received:
    """Record every alert of `message` in one transaction."""
    moment = now or datetime.now(UTC)
    counts = {"opened": 0, "refreshed": 0, "resolved": 0, "ignored": 0}
    with workspace.store.session() as session:
        for alert in message.alerts:
            key = alert.fingerprint or fingerprint(alert.labels)
            record = session.scalar(
                select(AlertRecord).where(AlertRecord.active_key == f"{ALERTMANAGER}:{key}")
            )
            if alert.status == "resolved":
                if record is None:
                    counts["ignored"] += 1
                    continue
                resolve(record, alert.endsAt or moment)
                record.updated_at = moment
                counts["resolved"] += 1
                workspace.audit(
                    session, "alert.resolve", f"alert:{record.id}", {"source": ALERTMANAGER}
                )
                continue
            if record is None:
                record = _opened(alert, key, moment, alert_project(session, alert.labels))
                session.add(record)
                fire(session, record, moment)
                session.flush()
                counts["opened"] += 1
                workspace.audit(
                    session, "alert.fire", f"alert:{record.id}",
                    {"rule": record.rule, "labels": record.labels, "source": ALERTMANAGER},
                )  # fmt: skip
            else:
                record.annotations = alert.annotations
                record.updated_at = moment
                counts["refreshed"] += 1
    return Received(**counts)


def _opened(alert: WebhookAlert, key: str, moment: datetime, project: str) -> AlertRecord:
    return AlertRecord(
        id=new_id(),
        project=project,
        fingerprint=key,
        active_key=f"{ALERTMANAGER}:{key}",
        rule=alert.labels.get("alertname", "(unnamed)"),
        labels=alert.labels,
        annotations=alert.annotations,
        severity=alert.labels.get("severity"),
        state=PENDING,
        value=None,
        started_at=alert.startsAt,
        source=ALERTMANAGER,
        generator_url=alert.generatorURL or None,
        updated_at=moment,
    )
