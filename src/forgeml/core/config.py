"""Settings, read once from the environment (pydantic-settings).

`FORGEML_HOME` (default `./.forgeml`) holds `forgeml.db` and `artifacts/`;
`FORGEML_DB_URL` and `FORGEML_ARTIFACTS_URL` point elsewhere (PostgreSQL, `s3://`).
"""

from __future__ import annotations

import getpass
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where forgeml keeps its records. Every field can be set as `FORGEML_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="FORGEML_", extra="ignore")

    home: Path = Field(
        default=Path(".forgeml"),
        description="Folder holding the embedded database, artifacts and logs.",
    )
    db_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the metadata store; default SQLite in FORGEML_HOME.",
    )
    artifacts_url: str | None = Field(
        default=None,
        description="fsspec URL of the artifact store; default FORGEML_HOME/artifacts.",
    )
    run_lease_seconds: int = Field(
        default=30,
        ge=1,
        description="A run whose heartbeat is older than this is marked KILLED.",
    )
    user: str | None = Field(
        default=None,
        description="Actor recorded in the audit log; default the login name.",
    )

    @property
    def database_url(self) -> str:
        """The metadata store URL, defaulting to SQLite under `home`."""
        if self.db_url:
            return self.db_url
        return f"sqlite:///{(self.home / 'forgeml.db').resolve()}"

    @property
    def artifact_root(self) -> str:
        """The artifact store URL, defaulting to `home/artifacts`."""
        if self.artifacts_url:
            return self.artifacts_url
        return str((self.home / "artifacts").resolve())

    @property
    def actor(self) -> str:
        """Who is acting, for the audit log."""
        if self.user:
            return self.user
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return "unknown"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings()
