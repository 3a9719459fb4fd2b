"""`forgeml monitor`: what forgeml gives a team's own Prometheus and Grafana."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Monitoring: alert rules, dashboards.")


@app.command()
def rules() -> None:
    """Print forgeml's Prometheus alert rules (a rule file for `rule_files:`)."""
    from forgeml.monitor.assets import rules_text

    typer.echo(rules_text(), nl=False)


@app.command()
def dashboard() -> None:
    """Print forgeml's Grafana dashboard (JSON, to import into Grafana)."""
    from forgeml.monitor.assets import dashboard_text

    typer.echo(dashboard_text(), nl=False)
