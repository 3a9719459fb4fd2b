"""The opened workspace: settings, metadata store and artifact store, together."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from forgeml.core import audit
from forgeml.core.artifacts import ArtifactStore
from forgeml.core.config import Settings, get_settings
from forgeml.core.store import Store, open_store


@dataclass
class Workspace:
    """Everything a command needs to read and write forgeml's records."""

    settings: Settings

    @cached_property
    def store(self) -> Store:
        return open_store(self.settings.database_url)

    @cached_property
    def artifacts(self) -> ArtifactStore:
        return ArtifactStore(self.settings.artifact_root)

    @property
    def actor(self) -> str:
        return self.settings.actor

    def audit(self, session: Any, action: str, object_ref: str, payload: dict[str, Any]) -> None:
        """Append an audit event inside `session`'s transaction."""
        audit.append(session, self.actor, action, object_ref, payload)

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.dispose()


def open_workspace(settings: Settings | None = None) -> Workspace:
    """The workspace described by `settings` (default: the environment's)."""
    return Workspace(settings or get_settings())
