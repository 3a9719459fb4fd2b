"""The opened workspace: settings, metadata store and artifact store, together."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forgeml.core.artifacts import ArtifactStore
    from forgeml.core.config import Settings
    from forgeml.core.store import Store

# The stores (SQLAlchemy, fsspec, pydantic-settings) are imported when first used, so that
# `import forgeml` and `forgeml --help` stay cheap.


@dataclass
class Workspace:
    """Everything a command needs to read and write forgeml's records."""

    settings: Settings

    @cached_property
    def store(self) -> Store:
        from forgeml.core.store import open_store

        return open_store(self.settings.database_url)

    @cached_property
    def artifacts(self) -> ArtifactStore:
        from forgeml.core.artifacts import ArtifactStore

        return ArtifactStore(self.settings.artifact_root)

    @property
    def actor(self) -> str:
        return self.settings.actor

    def audit(self, session: Any, action: str, object_ref: str, payload: dict[str, Any]) -> None:
        """Append an audit event inside `session`'s transaction."""
        from forgeml.core import audit

        audit.append(session, self.actor, action, object_ref, payload)

    def acting_as(self, actor: str) -> Workspace:
        """This workspace with `actor` named in the audit log (an API request's caller).

        The stores are shared, not reopened: close the workspace this came from, not it.
        """
        view = Workspace(self.settings.model_copy(update={"user": actor}))
        view.__dict__["store"] = self.store
        if "artifacts" in self.__dict__:
            view.__dict__["artifacts"] = self.artifacts
        return view

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.dispose()


def open_workspace(settings: Settings | None = None) -> Workspace:
    """The workspace described by `settings` (default: the environment's)."""
    from forgeml.core.config import get_settings

    return Workspace(settings or get_settings())
