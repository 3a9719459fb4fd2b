"""The Prometheus alert rules and the Grafana dashboard forgeml ships.

Both are files in this package (`forgeml-rules.yml`, `forgeml-dashboard.json`), printed by
`forgeml monitor rules` and `forgeml monitor dashboard` for a team's own Prometheus and
Grafana. Every expression in them names only metrics that forgeml's processes export
(`forgeml.serve.metrics`, the gateway's), which tests/monitor/ checks, and every rule has a
`promtool test rules` case there.
"""

from __future__ import annotations

from importlib import resources

RULES_FILE = "forgeml-rules.yml"
DASHBOARD_FILE = "forgeml-dashboard.json"


def rules_text() -> str:
    """The alert rule file, as Prometheus loads it (`rule_files:`)."""
    return resources.files(__package__).joinpath(RULES_FILE).read_text(encoding="utf-8")


def dashboard_text() -> str:
    """The Grafana dashboard (classic JSON model, a `datasource` variable for Prometheus)."""
    return resources.files(__package__).joinpath(DASHBOARD_FILE).read_text(encoding="utf-8")
