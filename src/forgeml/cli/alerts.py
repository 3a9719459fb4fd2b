"""`forgeml alerts ...`: alerts fired by `forgeml server`'s rules or received from
Alertmanager: list, show, acknowledge."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say

app = typer.Typer(
    help="Alerts fired by forgeml server's rules or received from Alertmanager.",
    no_args_is_help=True,
)


def _when(value: str | None) -> str:
    return value[:19].replace("T", " ") if value else "-"


@app.command("list")
def list_(
    state: Annotated[str, typer.Option(help="pending, firing, resolved or all.")] = "firing",
    json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """List alerts in a state (firing by default), newest first."""
    from forgeml.core.workspace import open_workspace
    from forgeml.monitor.alerts import alert_summary, list_alerts

    workspace = open_workspace()
    try:
        alerts = [alert_summary(record) for record in list_alerts(workspace, state)]
    finally:
        workspace.close()
    if json:
        print_json(alerts)
        return
    if not alerts:
        say(f"No {state if state != 'all' else ''} alerts.".replace("  ", " "))
        return
    rows = [_row(alert) for alert in alerts]
    print_table(
        None, ["id", "rule", "state", "severity", "labels", "started", "acked", "source"], rows
    )


def _row(alert: dict[str, Any]) -> list[str]:
    labels = ", ".join(
        f"{k}={v}" for k, v in sorted(alert["labels"].items()) if k not in ("alertname", "severity")
    )
    return [
        alert["id"][:12], alert["rule"], alert["state"], alert["severity"] or "-", labels,
        _when(alert["started_at"]), alert["acked_by"] or "-", alert["source"],
    ]  # fmt: skip


def _find(workspace: Any, alert_id: str) -> str:
    """An alert id from its full value or a unique prefix (as `list` prints it)."""
    from sqlalchemy import select

    from forgeml.core.errors import NotFoundError, UsageError
    from forgeml.core.store import AlertRecord

    with workspace.store.session() as session:
        ids = list(
            session.scalars(
                select(AlertRecord.id).where(AlertRecord.id.startswith(alert_id, autoescape=True))
            )
        )
    if not alert_id or not ids:
        raise NotFoundError(f"No alert has the id {alert_id!r}.")
    if len(ids) > 1:
        raise UsageError(f"The id prefix {alert_id!r} matches {len(ids)} alerts: give more of it.")
    return ids[0]


@app.command("show")
def show(
    alert_id: Annotated[str, typer.Argument(help="The alert's id (or a unique prefix).")],
    json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Show one alert: labels, annotations, value, times, acknowledgement."""
    from forgeml.core.workspace import open_workspace
    from forgeml.monitor.alerts import alert_summary, get_alert

    workspace = open_workspace()
    try:
        alert = alert_summary(get_alert(workspace, _find(workspace, alert_id)))
    finally:
        workspace.close()
    if json:
        print_json(alert)
        return
    rows = [[key, _text(alert[key])] for key in alert if key not in ("labels", "annotations")]
    rows += [[f"label {k}", v] for k, v in sorted(alert["labels"].items())]
    rows += [[k, v] for k, v in sorted(alert["annotations"].items())]
    print_table(f"alert {alert['id']}", ["field", "value"], rows)


def _text(value: Any) -> str:
    return "-" if value is None else str(value)


@app.command("ack")
def ack(
    alert_id: Annotated[str, typer.Argument(help="The alert's id (or a unique prefix).")],
) -> None:
    """Acknowledge an alert (the first acknowledgement is kept)."""
    from forgeml.core.workspace import open_workspace
    from forgeml.monitor.alerts import ack_alert

    workspace = open_workspace()
    try:
        record = ack_alert(workspace, _find(workspace, alert_id))
    finally:
        workspace.close()
    say(f"Alert {record.id} ({record.rule}) acknowledged by {record.acked_by}.")
