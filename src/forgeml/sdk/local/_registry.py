"""Runs and model versions of the local workspace, as `forgeml.client.Runs` and
`forgeml.client.Models` answer them remotely."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from typing import Any, Literal

from forgeml.core.errors import UsageError
from forgeml.core.workspace import open_workspace


class LocalRuns:
    """The runs of the local workspace, as `forgeml.client.Runs` answers them remotely."""

    def list(self, name: str | None = None) -> list[dict[str, Any]]:
        from forgeml.tracking import list_runs, reap_expired, run_summary

        with closing(open_workspace()) as workspace:
            reap_expired(workspace)
            found = list_runs(workspace, name=name, project=workspace.project)
            return [run_summary(run) for run in found]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.tracking import get_run, reap_expired, run_detail

        with closing(open_workspace()) as workspace:
            reap_expired(workspace)
            return run_detail(get_run(workspace, ref))

    def metrics(self, ref: str, keys: Sequence[str] | None = None) -> dict[str, Any]:
        from forgeml.tracking import get_run
        from forgeml.tracking.history import metric_history

        with closing(open_workspace()) as workspace:
            record = get_run(workspace, ref)
            curves = metric_history(workspace, record.id, list(keys) if keys else None)
            return {
                "run_id": record.id,
                "metrics": {k: [list(p) for p in c] for k, c in curves.items()},
            }


class LocalModels:
    """The local model registry, as `forgeml.client.Models` answers it remotely."""

    def list(self, name: str | None = None) -> list[dict[str, Any]]:
        from forgeml.tracking import list_models, model_aliases, version_summary

        with closing(open_workspace()) as workspace:
            records = list_models(workspace, name, project=workspace.project)
            aliases = {n: model_aliases(workspace, n) for n in {r.name for r in records}}
            return [version_summary(r, aliases[r.name]) for r in records]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.tracking import get_model_version, model_aliases, version_summary

        with closing(open_workspace()) as workspace:
            record = get_model_version(workspace, ref)
            return version_summary(record, model_aliases(workspace, record.name))

    def promote(
        self,
        name: str,
        version: int,
        alias: str = "production",
        metric: str = "accuracy",
        mode: str = "max",
        force: bool = False,
        max_dp_diff: float | None = None,
        max_eo_diff: float | None = None,
    ) -> dict[str, Any]:
        from forgeml.tracking import FairnessBounds, promotion_summary
        from forgeml.tracking import promote as promote_version

        if mode not in ("max", "min"):
            raise UsageError(f"Unknown mode '{mode}': choose max or min.")
        direction: Literal["max", "min"] = "max" if mode == "max" else "min"
        with closing(open_workspace()) as workspace:
            bounds = FairnessBounds(max_dp_diff, max_eo_diff)
            result = promote_version(
                workspace, name, version, alias, metric, direction, force, fairness=bounds
            )
            return promotion_summary(result)
