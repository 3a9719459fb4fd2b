"""Labelling tasks of the local workspace, as `forgeml.client.Labels` answers them
remotely."""

from __future__ import annotations

from contextlib import closing
from typing import Any

from forgeml.core.workspace import open_workspace


class LocalLabels:
    """The local side of the seam: what `forgeml.client.Labels` answers, from the
    workspace, labelling as `annotator` (default: the workspace's actor)."""

    def __init__(self, annotator: str | None = None) -> None:
        self.annotator = annotator

    def create(self, spec: dict[str, Any]) -> dict[str, Any]:
        from forgeml.label import TaskSpec, create_task, task_summary

        with closing(open_workspace()) as workspace:
            return task_summary(create_task(workspace, TaskSpec.model_validate(spec)))

    def reorder(
        self, name: str, strategy: str, model: str | None = None, seed: int = 0
    ) -> dict[str, Any]:
        from forgeml.label import Reorder, reorder_task, task_summary

        change = Reorder.model_validate({"strategy": strategy, "model": model, "seed": seed})
        with closing(open_workspace()) as workspace:
            return task_summary(reorder_task(workspace, name, change))

    def list(self) -> list[dict[str, Any]]:
        from forgeml.label import list_tasks

        with closing(open_workspace()) as workspace:
            return list_tasks(workspace)

    def show(self, name: str) -> dict[str, Any]:
        from forgeml.label import describe_task

        with closing(open_workspace()) as workspace:
            return describe_task(workspace, name)

    def next(self, name: str) -> dict[str, Any] | None:
        from forgeml.label import next_item

        with closing(open_workspace()) as workspace:
            return next_item(workspace, name, self.annotator or workspace.actor)

    def submit(
        self, name: str, item: int, label: Any, *, adjudicate: bool = False
    ) -> dict[str, Any]:
        from forgeml.label import submit

        with closing(open_workspace()) as workspace:
            who = self.annotator or workspace.actor
            return submit(workspace, name, item, who, label, adjudicate=adjudicate)

    def import_labels(
        self,
        name: str,
        content: str,
        file_format: str,
        key: str = "item",
        annotator: str | None = None,
    ) -> dict[str, Any]:
        from forgeml.label import import_labels
        from forgeml.label.imports import parse_labels

        labels = parse_labels(content, "the content", file_format, annotator, key)
        with closing(open_workspace()) as workspace:
            return import_labels(workspace, name, labels, key)

    def agreement(self, name: str) -> dict[str, Any]:
        from forgeml.label import task_agreement

        with closing(open_workspace()) as workspace:
            return task_agreement(workspace, name)

    def export(
        self,
        name: str,
        dataset: str | None = None,
        column: str = "label",
        resolve: str = "adjudicated",
    ) -> dict[str, Any]:
        from forgeml.core.errors import UsageError
        from forgeml.label import RESOLVE_CHOICES, export_task
        from forgeml.label.export import Resolve

        if resolve not in RESOLVE_CHOICES:
            raise UsageError(
                f"Unknown resolve '{resolve}': choose one of {', '.join(RESOLVE_CHOICES)}."
            )
        chosen: Resolve = "adjudicated" if resolve == "adjudicated" else "majority"
        with closing(open_workspace()) as workspace:
            return export_task(workspace, name, dataset=dataset, column=column, resolve=chosen)
