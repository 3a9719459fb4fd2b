"""`forgeml alerts ...`: alerts fired by `forgeml server`'s rules or received from
Alertmanager: list, show, acknowledge, in FORGEML_PROJECT (an alert belongs to the project of
the deployment, model or dataset its labels name, else to `default`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say
from forgeml.core.errors import UsageError
from forgeml.sdk.local import LocalAlerts

app = typer.Typer(
    help="Alerts fired by forgeml server's rules or received from Alertmanager.",
    no_args_is_help=True,
)


def _when(value: str | None) -> str:
    return value[:19].replace("T", " ") if value else "-"


def _alerts() -> Any:
    from forgeml.cli._remote import source

    return source(lambda client: client.alerts, LocalAlerts)


@app.command("list")
def list_(
    state: Annotated[str, typer.Option(help="pending, firing, resolved or all.")] = "firing",
    json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """List the project's alerts in a state (firing by default), newest first."""
    from forgeml.monitor.alerts import STATES

    if state != "all" and state not in STATES:  # refused here: the same exit code remotely
        raise UsageError(f"Unknown alert state {state!r}: use {', '.join(STATES)} or all.")
    alerts = _alerts().list(state)
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


@app.command("show")
def show(
    alert_id: Annotated[str, typer.Argument(help="The alert's id (or a unique prefix).")],
    json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Show one alert: labels, annotations, value, times, acknowledgement."""
    alert = _alerts().show(alert_id)
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
    """Acknowledge an alert of the project (the first acknowledgement is kept)."""
    alert = _alerts().ack(alert_id)
    say(f"Alert {alert['id']} ({alert['rule']}) acknowledged by {alert['acked_by']}.")
