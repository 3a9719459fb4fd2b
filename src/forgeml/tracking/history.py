"""Metric curves of runs, read back from MLflow (for `forgeml runs compare`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forgeml.tracking._mlflow import open_client

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace


def metric_history(
    workspace: Workspace, run_id: str, keys: list[str] | None = None
) -> dict[str, list[tuple[int, float]]]:
    """Every logged value of each metric of a run, as (step, value) sorted by step.

    Args:
        workspace: whose MLflow holds the run.
        run_id: the run.
        keys: only these metrics (default: all the run has).
    """
    client = open_client(workspace)
    names = keys if keys is not None else sorted(client.get_run(run_id).data.metrics)
    curves = {}
    for key in names:
        points = client.get_metric_history(run_id, key)
        curves[key] = sorted((int(point.step), float(point.value)) for point in points)
    return curves
