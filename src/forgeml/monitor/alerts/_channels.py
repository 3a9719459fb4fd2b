"""Where alerts go: channels configured in a typed YAML file (`forgeml server
--alert-config FILE`), and their delivery, once per (alert, channel, status).

```yaml
external_url: http://forgeml.example:8080   # optional, put in payloads
interval_s: 15                              # between evaluations
rule_files: [my-rules.yml]                  # beside the shipped rules
targets: [http://127.0.0.1:9100/metrics]    # scraped beside every deployment replica
scrape_allow_private: true                  # the targets may be private (off by default)
channels:
  - {name: ops-log, type: log}
  - {name: hook, type: webhook, url: http://127.0.0.1:9000/hook, allow_private: true}
  - {name: mail, type: email, smtp_host: 127.0.0.1, smtp_port: 25,
     sender: forgeml@example.org, to: [oncall@example.org]}
```

A channel is a small class with `send(record)` behind the `Channel` protocol, built by
`build_channels` from the registry `CHANNEL_KINDS`. Deliveries are recorded in
`alert_deliveries` after a channel accepted them, so a restarted server does not send
one again; a channel that fails is logged and tried again next cycle, and never stops
evaluation or the other channels. A crash between a send and its record can send that
one notification again: delivery is at least once.
"""

from __future__ import annotations

import logging
import os
import smtplib
from collections.abc import Sequence
from datetime import datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Annotated, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import and_, or_, select
from sqlalchemy.exc import IntegrityError

from forgeml.core import netguard
from forgeml.core.errors import ConfigError
from forgeml.core.ids import new_id
from forgeml.core.store import AlertDeliveryRecord, AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._payload import message_for

log = logging.getLogger(__name__)


class LogChannelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=128)
    type: Literal["log"]


class WebhookChannelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=128)
    type: Literal["webhook"]
    url: str = Field(pattern=r"^https?://")
    timeout_s: float = Field(5.0, gt=0)
    allow_private: bool = Field(
        False,
        description="Let the webhook reach private, loopback and link-local addresses "
        "(off by default: forgeml.core.netguard's SSRF rules).",
    )


class EmailChannelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=128)
    type: Literal["email"]
    smtp_host: str
    smtp_port: int = Field(25, ge=1, le=65535)
    sender: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    to: list[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+$")]] = Field(min_length=1)
    starttls: bool = False
    username: str | None = None
    password_env: str | None = Field(None, description="Environment variable with the password.")
    timeout_s: float = Field(10.0, gt=0)


ChannelSpec = Annotated[
    LogChannelSpec | WebhookChannelSpec | EmailChannelSpec, Field(discriminator="type")
]


class AlertConfig(BaseModel):
    """The alert configuration file."""

    model_config = ConfigDict(extra="forbid")
    external_url: str = ""
    channels: list[ChannelSpec] = Field(default_factory=list)
    # user rule files (Prometheus' format) evaluated beside the shipped ones; a relative
    # path is read from the config file's folder
    rule_files: list[Path] = Field(default_factory=list)
    # extra /metrics URLs scraped each cycle, beside every ready deployment replica
    targets: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(default_factory=list)
    scrape_allow_private: bool = Field(
        False,
        description="Let the targets be private, loopback or link-local addresses "
        "(off by default: forgeml.core.netguard's SSRF rules).",
    )
    interval_s: float = Field(15.0, gt=0, description="Seconds between evaluations.")
    # notifications older than this are not sent (a channel added later gets no backlog)
    max_age_s: float = Field(3600.0, gt=0)


def load_config(path: Path) -> AlertConfig:
    """Read and validate an alert config file.

    Raises:
        ConfigError: unreadable, not YAML, or invalid (naming the key).
    """
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"Cannot read the alert config {path}: {error.strerror}.") from None
    except yaml.YAMLError:
        raise ConfigError(f"The alert config {path} is not valid YAML.") from None
    try:
        config = AlertConfig.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise ConfigError(f"{path}: {where}: {first['msg']}.") from None
    config.rule_files = [Path(path).parent / rule for rule in config.rule_files]
    names = [channel.name for channel in config.channels]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: channels: two channels share a name.")
    return config


class Channel(Protocol):
    """Sends one alert's notification; raises on failure (the delivery is retried)."""

    name: str

    def send(self, record: AlertRecord) -> None: ...


class LogChannel:
    def __init__(self, spec: LogChannelSpec, external_url: str) -> None:
        self.name = spec.name

    def send(self, record: AlertRecord) -> None:
        summary = record.annotations.get("summary", "")
        log.warning("alert %s %s %s: %s", record.state, record.rule, record.labels, summary)


class WebhookChannel:
    def __init__(self, spec: WebhookChannelSpec, external_url: str) -> None:
        self.name = spec.name
        self._spec = spec
        self._external_url = external_url

    def send(self, record: AlertRecord) -> None:
        payload = message_for(record, self.name, self._external_url)
        policy = netguard.UrlPolicy(
            who=f"The webhook {self.name}", allow_private=self._spec.allow_private
        )
        # no redirects: a 3xx is a failed delivery, never a hop to somewhere unchecked
        with netguard.guarded_client(policy, timeout=self._spec.timeout_s) as client:
            response = client.post(self._spec.url, json=payload)
        response.raise_for_status()


class EmailChannel:
    def __init__(self, spec: EmailChannelSpec, external_url: str) -> None:
        self.name = spec.name
        self._spec = spec

    def send(self, record: AlertRecord) -> None:
        spec = self._spec
        message = EmailMessage()
        labels = ", ".join(f"{k}={v}" for k, v in sorted(record.labels.items()))
        message["Subject"] = f"[{record.state.upper()}] {record.rule} ({labels})"
        message["From"] = spec.sender
        message["To"] = ", ".join(spec.to)
        lines = [f"{key}: {value}" for key, value in sorted(record.annotations.items())]
        lines += ["", f"labels: {labels}", f"started: {record.started_at.isoformat()}"]
        message.set_content("\n".join(lines) + "\n")
        with smtplib.SMTP(spec.smtp_host, spec.smtp_port, timeout=spec.timeout_s) as smtp:
            if spec.starttls:
                smtp.starttls()
            if spec.username:
                smtp.login(spec.username, os.environ.get(spec.password_env or "", ""))
            smtp.send_message(message)


CHANNEL_KINDS: dict[str, type[LogChannel] | type[WebhookChannel] | type[EmailChannel]] = {
    "log": LogChannel,
    "webhook": WebhookChannel,
    "email": EmailChannel,
}


def build_channels(config: AlertConfig) -> list[Channel]:
    return [
        CHANNEL_KINDS[spec.type](spec, config.external_url)  # type: ignore[arg-type]
        for spec in config.channels
    ]


def deliver(
    workspace: Workspace, channels: Sequence[Channel], now: datetime, max_age_s: float = 3600.0
) -> int:
    """Send every notification not sent yet (forgeml's own alerts, firing or resolved within
    `max_age_s`), recording each one a channel accepted. Returns how many were sent."""
    if not channels:
        return 0
    since = now - timedelta(seconds=max_age_s)
    with workspace.store.session() as session:
        due = list(
            session.scalars(
                select(AlertRecord)
                .where(
                    AlertRecord.source == "forgeml",
                    or_(
                        and_(AlertRecord.state == "firing", AlertRecord.fired_at >= since),
                        and_(AlertRecord.state == "resolved", AlertRecord.resolved_at >= since,
                             AlertRecord.fired_at.is_not(None)),
                    ),
                )
                .order_by(AlertRecord.fire_seq)
            )
        )  # fmt: skip
        sent = {
            (row.alert_id, row.channel, row.status)
            for row in session.scalars(
                select(AlertDeliveryRecord).where(
                    AlertDeliveryRecord.alert_id.in_([record.id for record in due])
                )
            )
        }
    count = 0
    for channel in channels:
        for record in due:
            if (record.id, channel.name, record.state) in sent:
                continue
            try:
                channel.send(record)
            except Exception as error:
                log.warning("alert channel %s failed (retried next cycle): %s", channel.name, error)
                break  # the channel is down: the rest of its queue waits for the next cycle
            count += _record_delivery(workspace, record, channel.name)
    return count


def _record_delivery(workspace: Workspace, record: AlertRecord, channel: str) -> int:
    try:
        with workspace.store.session() as session:
            session.add(
                AlertDeliveryRecord(
                    id=new_id(), alert_id=record.id, channel=channel, status=record.state
                )
            )
    except IntegrityError:
        return 0  # another server recorded it first
    return 1
