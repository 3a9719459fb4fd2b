"""Client resource of labelling tasks (`/api/v1/labels`); each method answers what the
matching `forgeml label ... --json` prints. The annotator is always the caller: the server
takes it from the token."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forgeml.client._resources import Items, _Resource, _segment


class Labels(_Resource):
    """Labelling tasks: active-learning order, leases, agreement, import and export."""

    def create(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Create a task from `spec` (`TaskSpec`'s fields; `--model` runs on the server)."""
        return self._transport.post("/labels", dict(spec))

    def reorder(
        self, name: str, strategy: str, model: str | None = None, seed: int = 0
    ) -> dict[str, Any]:
        """Rank the task's items again (`label reorder --json`)."""
        body = {"strategy": strategy, "model": model, "seed": seed}
        return self._transport.post(f"/labels/{_segment(name)}/reorder", body)

    def list(self) -> Items:
        """Every labelling task (`label list --json`)."""
        return self._transport.pages("/labels")

    def show(self, name: str) -> dict[str, Any]:
        """A task and its progress per annotator (`label show --json`)."""
        return self._transport.get(f"/labels/{_segment(name)}")

    def next(self, name: str) -> dict[str, Any] | None:
        """Lease the caller the next item, or None when nothing is left (`label next`)."""
        answer: dict[str, Any] | None = self._transport.post(f"/labels/{_segment(name)}/next")
        return answer

    def submit(
        self, name: str, item: int, label: Any, *, adjudicate: bool = False
    ) -> dict[str, Any]:
        """The caller's label for `item` (`label submit --json`); `adjudicate` settles it."""
        route = "adjudicate" if adjudicate else "submit"
        body = {"item": item, "label": label}
        return self._transport.post(f"/labels/{_segment(name)}/{route}", body)

    def import_labels(
        self,
        name: str,
        content: str,
        file_format: str,
        key: str = "item",
        annotator: str | None = None,
    ) -> dict[str, Any]:
        """Import the labels of a file's `content` (csv, jsonl or label-studio): all are
        stored, or none (`label import --json`)."""
        body = {"format": file_format, "content": content, "key": key, "annotator": annotator}
        return self._transport.post(f"/labels/{_segment(name)}/import", body)

    def agreement(self, name: str) -> dict[str, Any]:
        """Cohen's kappa per pair of annotators and Fleiss' kappa (`label agreement --json`)."""
        return self._transport.get(f"/labels/{_segment(name)}/agreement")

    def export(
        self,
        name: str,
        dataset: str | None = None,
        column: str = "label",
        resolve: str = "adjudicated",
    ) -> dict[str, Any]:
        """Record the settled labels as a new dataset version (`label export --json`)."""
        body = {"dataset": dataset, "column": column, "resolve": resolve}
        return self._transport.post(f"/labels/{_segment(name)}/export", body)
