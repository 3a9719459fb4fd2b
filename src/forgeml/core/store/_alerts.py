"""Alert records: each alert instance forgeml fired (or Alertmanager reported) and the
notifications sent for it.

An `alerts` row is one episode of one alert: a rule with one set of labels, from pending
(or firing) until resolved; the same labels firing again later is a new row. `active_key`
is `source:fingerprint` while the alert is pending or firing and NULL once it is resolved,
so a unique constraint on it keeps at most one active row per alert whoever evaluates
(NULLs never collide, on SQLite and PostgreSQL alike). `fire_seq` numbers the rows in the
order they started firing, assigned inside the firing transaction: the cursor of
`forgeml.monitor.alerts.fired_since`.

`alert_deliveries` holds one row per (alert, channel, status) notification sent, unique,
so a restarted server never sends one twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from forgeml.core.store._models import Base, utcnow


class AlertRecord(Base):
    """One alert episode: its rule, labels, annotations, state and times."""

    __tablename__ = "alerts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # the project it belongs to (migration 0024)
    project: Mapped[str] = mapped_column(
        String(128), default="default", server_default="default", index=True
    )
    # 16 hex digits of the labels' digest (Alertmanager's width), or Alertmanager's own
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    active_key: Mapped[str | None] = mapped_column(String(96), unique=True)
    rule: Mapped[str] = mapped_column(String(256), index=True)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    annotations: Mapped[dict[str, str]] = mapped_column(JSON)
    severity: Mapped[str | None] = mapped_column(String(32))
    # pending, firing or resolved
    state: Mapped[str] = mapped_column(String(16), index=True)
    value: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    fire_seq: Mapped[int | None] = mapped_column(Integer, unique=True)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    acked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    acked_by: Mapped[str | None] = mapped_column(String(128))
    # forgeml (its own rule evaluation) or alertmanager (the receiver)
    source: Mapped[str] = mapped_column(String(16))
    generator_url: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AlertDeliveryRecord(Base):
    """One notification sent to a channel: the alert, the channel, firing or resolved."""

    __tablename__ = "alert_deliveries"
    __table_args__ = (UniqueConstraint("alert_id", "channel", "status"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    alert_id: Mapped[str] = mapped_column(ForeignKey("alerts.id"), index=True)
    channel: Mapped[str] = mapped_column(String(128))
    # firing or resolved
    status: Mapped[str] = mapped_column(String(16))
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
