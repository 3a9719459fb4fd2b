"""The local side of the datasets' seam (`forgeml.sdk.datasets`, `forgeml data`)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

from forgeml.core.workspace import open_workspace

Items = list[dict[str, Any]]  # named: the `list` method below would shadow the type


class LocalDatasets:
    """The local dataset catalog, as `forgeml.client.Datasets` answers it remotely."""

    def list(self) -> list[dict[str, Any]]:
        from forgeml.data import catalog

        with closing(open_workspace()) as workspace, workspace.store.session() as session:
            found = catalog.list_datasets(session, workspace.project)
            return [catalog.version_summary(v) for _, v in found]

    def versions(self, name: str) -> Items:
        from forgeml.data import catalog

        with closing(open_workspace()) as workspace, workspace.store.session() as session:
            return [catalog.version_summary(v) for v in catalog.versions_of(session, name)]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.data import catalog

        with closing(open_workspace()) as workspace:
            return catalog.describe(workspace, ref)

    def upload(self, name: str, path: Path, **options: Any) -> dict[str, Any]:
        from forgeml.data import catalog
        from forgeml.data.ingest import IngestOptions
        from forgeml.data.pipeline import add as add_version

        label = options.pop("label", None)
        parsed = IngestOptions.model_validate(options)
        with closing(open_workspace()) as workspace:
            return catalog.recorded_summary(add_version(workspace, name, path, parsed, label))

    def frame(self, ref: str, split: str | None = None, limit: int | None = None) -> Any:
        """The version's rows (`data head|export`): a dataset of the workspace's project only
        (OtherProjectError otherwise), as the server's frame route answers."""
        from forgeml.data import catalog

        with closing(open_workspace()) as workspace:
            with workspace.store.session() as session:
                version = catalog.resolve_to_read(workspace, session, ref)
            rows = catalog.read_frame(workspace, version, split)
            return version.ref, rows if limit is None else rows.head(limit)

    def diff(self, ref: str, to: str) -> dict[str, Any]:
        from forgeml.data import catalog, quality

        with closing(open_workspace()) as workspace:
            with workspace.store.session() as session:
                a, b = catalog.resolve(session, ref), catalog.resolve(session, to)
            changes = quality.diff(
                catalog.profile_of(workspace, a), catalog.profile_of(workspace, b)
            )
            return {"from": a.ref, "to": b.ref, **changes}

    def query(self, sql: str, limit: int = 100) -> dict[str, Any]:
        from forgeml.data.query import run_query

        with closing(open_workspace()) as workspace:
            table = run_query(workspace, sql, limit)
            return {"columns": table.column_names, "rows": table.to_pylist()}

    def derive(
        self,
        ref: str,
        op: str,
        params: dict[str, Any],
        name: str | None = None,
        spec_name: str | None = None,
    ) -> dict[str, Any]:
        """Apply transform `op` to a version (`data clean|validate|... --json`)."""
        from forgeml.data.pipeline import derive, derived_summary

        with closing(open_workspace()) as workspace:
            derived = derive(workspace, op, ref, params, name=name, spec_name=spec_name)
            return derived_summary(derived)

    def rebuild(self, ref: str) -> dict[str, Any]:
        from forgeml.data.pipeline import rebuild as rebuild_version

        with closing(open_workspace()) as workspace:
            rebuilt = rebuild_version(workspace, ref)
            return {"ref": rebuilt.ref, "digest": rebuilt.expected, "actual": rebuilt.actual}
