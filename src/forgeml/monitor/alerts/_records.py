"""Reading and acknowledging recorded alerts, and the cursor pipeline triggers follow.

An alert belongs to the project of the subject its labels name (`_subjects`). A list shows
the workspace's project's alerts only; an alert is found by its id (or a prefix of it: the
workspace's project's alerts first) in whichever project, as an item read (the API
authorizes it in the alert's own project); an acknowledgement must act in the alert's
project.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, true
from sqlalchemy.orm import Session

from forgeml.core.errors import InvalidRequestError, NotFoundError, UsageError
from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts._state import STATES


def list_alerts(workspace: Workspace, state: str = "all", limit: int = 500) -> list[AlertRecord]:
    """The workspace's project's alerts in `state` (pending, firing, resolved or all), newest
    first.

    Raises:
        UsageError: an unknown state.
    """
    if state != "all" and state not in STATES:
        raise UsageError(f"Unknown alert state {state!r}: use {', '.join(STATES)} or all.")
    query = select(AlertRecord).where(AlertRecord.project == workspace.project)
    if state != "all":
        query = query.where(AlertRecord.state == state)
    with workspace.store.session() as session:
        return list(
            session.scalars(
                query.order_by(AlertRecord.started_at.desc(), AlertRecord.id).limit(limit)
            )
        )


def get_alert(workspace: Workspace, alert_id: str) -> AlertRecord:
    """The alert `alert_id` (or the one whose id starts with it), in whichever project.

    Raises:
        NotFoundError: no such alert.
        InvalidRequestError: the prefix matches several alerts.
    """
    with workspace.store.session() as session:
        return find_alert(session, alert_id, workspace.project)


def find_alert(session: Session, alert_id: str, project: str) -> AlertRecord:
    """The alert whose id is `alert_id`, else the one whose id starts with it (as `alerts
    list` prints them, shortened): `project`'s first, then any project's.

    Raises:
        NotFoundError: none does.
        InvalidRequestError: several do.
    """
    if not alert_id:
        raise NotFoundError("No alert has the id ''.")
    record = session.get(AlertRecord, alert_id)
    if record is not None:
        return record
    prefix = AlertRecord.id.startswith(alert_id, autoescape=True)
    for scope in (AlertRecord.project == project, true()):
        found = list(session.scalars(select(AlertRecord).where(prefix, scope).limit(2)))
        if len(found) > 1:
            raise InvalidRequestError(
                f"The id prefix {alert_id!r} matches more than one alert: give more of it."
            )
        if found:
            return found[0]
    raise NotFoundError(f"No alert has the id {alert_id!r}.")


def ack_alert(workspace: Workspace, alert_id: str, now: datetime | None = None) -> AlertRecord:
    """Acknowledge `alert_id` as the workspace's actor (again: the first ack stays).

    Raises:
        NotFoundError: no such alert.
        InvalidRequestError: the prefix matches several alerts.
        OtherProjectError: the alert belongs to another project than the workspace's.
    """
    with workspace.store.session() as session:
        record = find_alert(session, alert_id, workspace.project)
        workspace.check_own("Alert", record.id, record.project)
        if record.acked_at is None:
            record.acked_at = now or datetime.now(UTC)
            record.acked_by = workspace.actor
            workspace.audit(session, "alert.ack", f"alert:{record.id}", {"rule": record.rule})
    return record


def fired_since(workspace: Workspace, cursor: int = 0, limit: int = 100) -> list[AlertRecord]:
    """Alerts that started firing after `cursor`, in the order they fired, of every
    project.

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
        "project": record.project,
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
