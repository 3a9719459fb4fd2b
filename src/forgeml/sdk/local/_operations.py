"""The local side of the operations' seams: cost (`forgeml.sdk.cost`, `forgeml cost`),
alerts (`forgeml.sdk.alerts`, `forgeml alerts`) and deployments (`forgeml.sdk.deployments`,
`forgeml deploy`)."""

from __future__ import annotations

from contextlib import closing
from typing import Any

from forgeml.core.workspace import open_workspace

Items = list[dict[str, Any]]  # named: the `list` methods below would shadow the type


class LocalCost:
    """Cost of the local workspace, as `forgeml.client.Cost` answers it remotely."""

    def report(self, by: str = "job", since: str | None = None) -> dict[str, Any]:
        from forgeml.scheduler.cost import cost_summary, parse_since

        start = parse_since(since) if since is not None else None
        with closing(open_workspace()) as workspace:
            return cost_summary(workspace, by, start)

    def budgets(self) -> dict[str, Any]:
        from forgeml.scheduler.cost import budgets_summary

        with closing(open_workspace()) as workspace:
            return budgets_summary(workspace)


class LocalAlerts:
    """The local workspace's alerts, as `forgeml.client.Alerts` answers them remotely."""

    def list(self, state: str = "firing") -> Items:
        from forgeml.monitor.alerts import alert_summary, list_alerts

        with closing(open_workspace()) as workspace:
            return [alert_summary(record) for record in list_alerts(workspace, state)]

    def show(self, alert_id: str) -> dict[str, Any]:
        from forgeml.monitor.alerts import alert_summary, get_alert

        with closing(open_workspace()) as workspace:
            return alert_summary(get_alert(workspace, alert_id))

    def ack(self, alert_id: str) -> dict[str, Any]:
        from forgeml.monitor.alerts import ack_alert, alert_summary

        with closing(open_workspace()) as workspace:
            return alert_summary(ack_alert(workspace, alert_id))


class LocalDeployments:
    """The local deployments, as `forgeml.client.Deployments` answers them remotely."""

    def list(self, deleted: bool = False) -> Items:
        from forgeml.serve.deployments import list_deployments

        with closing(open_workspace()) as workspace:
            found = list_deployments(workspace, include_deleted=deleted, project=workspace.project)
            return [d.to_dict() for d in found]

    def show(self, name: str) -> dict[str, Any]:
        from forgeml.serve.deployments import get_deployment

        with closing(open_workspace()) as workspace:
            return get_deployment(workspace, name).to_dict()

    def delete(self, name: str) -> dict[str, Any]:
        from forgeml.serve.deployments import delete as delete_deployment

        with closing(open_workspace()) as workspace:
            return delete_deployment(workspace, name).to_dict()
