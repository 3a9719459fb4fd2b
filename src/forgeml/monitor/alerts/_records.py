"""Reading and acknowledging recorded alerts, and the cursor pipeline triggers follow."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from forgeml.core.errors import InvalidRequestError, NotFoundError, UsageError
from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._state import STATES


def list_alerts(workspace: Workspace, state: str = "all", limit: int = 500) -> list[AlertRecord]:
    """Alerts in `state` (pending, firing, resolved or all), newest first.

    Raises:
        UsageError: an unknown state.
    """
    if state != "all" and state not in STATES:
        raise UsageError(f"Unknown alert state {state!r}: use {', '.join(STATES)} or all.")
    query = select(AlertRecord)
    if state != "all":
        query = query.where(AlertRecord.state == state)
    with workspace.store.session() as session:
        return list(
            session.scalars(
                query.order_by(AlertRecord.started_at.desc(), AlertRecord.id).limit(limit)
            )
        )


def get_alert(workspace: Workspace, alert_id: str) -> AlertRecord:
    """The alert `alert_id` (or the one whose id starts with it).

    Raises:
        NotFoundError: no such alert.
    """
    with workspace.store.session() as session:
        record = session.get(AlertRecord, _alert_id(session, alert_id))
    if record is None:
        raise NotFoundError(f"No alert has the id {alert_id!r}.")
    return record


def _alert_id(session: Any, alert_id: str) -> str:
    """The id of the one alert whose id is `alert_id` or starts with it (as `alerts list`
    prints them, shortened).

    Raises:
        NotFoundError: none does.
        InvalidRequestError: several do.
    """
    query = select(AlertRecord.id).where(AlertRecord.id.startswith(alert_id, autoescape=True))
    ids = list(session.scalars(query.limit(2)))
    if not alert_id or not ids:
        raise NotFoundError(f"No alert has the id {alert_id!r}.")
    if alert_id in ids:
        return alert_id
    if len(ids) > 1:
        raise InvalidRequestError(
            f"The id prefix {alert_id!r} matches more than one alert: give more of it."
        )
    found: str = ids[0]
    return found


def ack_alert(workspace: Workspace, alert_id: str, now: datetime | None = None) -> AlertRecord:
    """Acknowledge `alert_id` as the workspace's actor (again: the first ack stays).

    Raises:
        NotFoundError: no such alert.
    """
    with workspace.store.session() as session:
        record = session.get(AlertRecord, _alert_id(session, alert_id))
        if record is None:
            raise NotFoundError(f"No alert has the id {alert_id!r}.")
        if record.acked_at is None:
            record.acked_at = now or datetime.now(UTC)
            record.acked_by = workspace.actor
            workspace.audit(session, "alert.ack", f"alert:{record.id}", {"rule": record.rule})
    return record


def fired_since(workspace: Workspace, cursor: int = 0, limit: int = 100) -> list[AlertRecord]:
    """Alerts that started firing after `cursor`, in the order they fired.

    The cursor is an alert's `fire_seq`: a number given to each alert when it starts
    firing (forgeml's own or received from Alertmanager), increasing in commit order, never
    reused or changed. A consumer keeps the last `fire_seq` it handled and passes it back:
    every alert that fires is returned exactly once across calls, whatever its later
    state (resolved alerts included), however the calls and server restarts interleave.
    """
    with workspace.store.session() as session:
        return list(
            session.scalars(
                select(AlertRecord)
                .where(AlertRecord.fire_seq > cursor)
                .order_by(AlertRecord.fire_seq)
                .limit(limit)
            )
        )


def alert_summary(record: AlertRecord) -> dict[str, Any]:
    """An alert as JSON (the CLI's `--json` and the API's answer)."""

    def iso(moment: datetime | None) -> str | None:
        if moment is None:
            return None
        aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
        return aware.isoformat()

    return {
        "id": record.id,
        "rule": record.rule,
        "state": record.state,
        "severity": record.severity,
        "labels": record.labels,
        "annotations": record.annotations,
        "value": record.value,
        "fingerprint": record.fingerprint,
        "source": record.source,
        "started_at": iso(record.started_at),
        "fired_at": iso(record.fired_at),
        "fire_seq": record.fire_seq,
        "resolved_at": iso(record.resolved_at),
        "acked_at": iso(record.acked_at),
        "acked_by": record.acked_by,
    }
