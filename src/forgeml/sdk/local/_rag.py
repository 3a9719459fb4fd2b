"""The local side of the RAG indexes' seam (`forgeml.sdk.rag`, `forgeml rag`): a list shows
FORGEML_PROJECT's indexes, a query searches one of that project only; `versions` and
`show` read an index by name, as the API's item reads do."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import closing
from typing import Any

from forgeml.core.workspace import open_workspace

Items = list[dict[str, Any]]  # named: the `list` method below would shadow the type


class LocalRag:
    """The local workspace's indexes, as `forgeml.client.Rag` answers them remotely."""

    def list(self) -> Items:
        from forgeml.rag.versions import describe, latest_versions

        with closing(open_workspace()) as workspace, workspace.store.session() as session:
            latest = latest_versions(session, workspace.project)
            return [{"name": name, **describe(version)} for name, version in latest]

    def versions(self, name: str) -> Items:
        from forgeml.rag.versions import describe, versions_of

        with closing(open_workspace()) as workspace, workspace.store.session() as session:
            return [describe(version) for version in versions_of(session, name)]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.rag.versions import describe, resolve

        with closing(open_workspace()) as workspace, workspace.store.session() as session:
            return describe(resolve(session, ref))

    def query(
        self,
        ref: str,
        text: str,
        k: int = 5,
        mode: str = "hybrid",
        filters: Mapping[str, str] | None = None,
        weight: float | None = None,
    ) -> Items:
        from forgeml.rag.versions import open_index

        with closing(open_workspace()) as workspace:
            opened = open_index(workspace, ref)
            try:
                hits = opened.search(text, k, mode, dict(filters or {}), weight)
                return [hit.__dict__ for hit in hits]
            finally:
                opened.close()
