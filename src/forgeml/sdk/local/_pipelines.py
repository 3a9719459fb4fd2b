"""The local side of the pipeline runs' seam (`forgeml.sdk.pipelines`, `forgeml pipelines`)."""

from __future__ import annotations

from contextlib import closing
from typing import Any

from forgeml.core.workspace import open_workspace


class LocalPipelines:
    """The local workspace's pipeline runs, as `forgeml.client.Pipelines` answers them."""

    def list(self, limit: int = 100) -> list[dict[str, Any]]:
        from forgeml.pipelines import list_runs, run_summary

        with closing(open_workspace()) as workspace:
            return [run_summary(run, steps=False) for run in list_runs(workspace, limit)]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.pipelines import find_run, run_summary

        with closing(open_workspace()) as workspace:
            return run_summary(find_run(workspace, ref))
