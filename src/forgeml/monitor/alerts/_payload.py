"""Alertmanager's webhook payload, version 4: what forgeml's webhook channel sends and what
its receiver (`POST /api/v1/alertmanager`) accepts. One definition for both directions
(prometheus.io/docs/alerting/latest/configuration/#webhook_config).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from forgeml.core.store import AlertRecord

ZERO_TIME = "0001-01-01T00:00:00Z"
"""Alertmanager's `endsAt` of an alert still firing (Go's zero time)."""


class WebhookAlert(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: Literal["firing", "resolved"]
    labels: dict[str, str] = Field(min_length=1)
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: datetime  # noqa: N815 - Alertmanager's field names
    endsAt: datetime | None = None  # noqa: N815
    generatorURL: str = ""  # noqa: N815
    fingerprint: str = ""


class WebhookMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: Literal["4"]
    groupKey: str = ""  # noqa: N815
    truncatedAlerts: int = 0  # noqa: N815
    status: Literal["firing", "resolved"]
    receiver: str
    groupLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonAnnotations: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    externalURL: str = ""  # noqa: N815
    alerts: list[WebhookAlert]


def _iso(moment: datetime | None) -> str:
    if moment is None:
        return ZERO_TIME
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat().replace("+00:00", "Z")


def message_for(record: AlertRecord, receiver: str, external_url: str) -> dict[str, object]:
    """The webhook payload announcing one alert (its firing, or its resolution)."""
    status = "resolved" if record.state == "resolved" else "firing"
    alert = {
        "status": status,
        "labels": record.labels,
        "annotations": record.annotations,
        "startsAt": _iso(record.started_at),
        "endsAt": _iso(record.resolved_at),
        "generatorURL": record.generator_url or "",
        "fingerprint": record.fingerprint,
    }
    group = {"alertname": record.rule}
    return {
        "version": "4",
        "groupKey": "{}:{" + f'alertname="{record.rule}"' + "}",
        "truncatedAlerts": 0,
        "status": status,
        "receiver": receiver,
        "groupLabels": group,
        "commonLabels": record.labels,
        "commonAnnotations": record.annotations,
        "externalURL": external_url,
        "alerts": [alert],
    }
