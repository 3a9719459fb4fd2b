"""Settings, read once from the environment (pydantic-settings).

`FORGEML_HOME` (default `./.forgeml`) holds `forgeml.db` and `artifacts/`;
`FORGEML_DB_URL` and `FORGEML_ARTIFACTS_URL` point elsewhere (PostgreSQL, `s3://`).
"""

from __future__ import annotations

import getpass
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
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
    scheduler_cpus: float | None = Field(
        default=None,
        gt=0,
        description="CPUs the local executor may hand out; default every core of this machine.",
    )
    scheduler_gpus: int | None = Field(
        default=None,
        ge=0,
        description="GPUs the local executor may hand out; default every GPU NVML sees.",
    )
    scheduler_memory_gb: float | None = Field(
        default=None,
        gt=0,
        description="Memory (GB) the local executor may hand out; default this machine's RAM.",
    )
    scheduler_interval: float = Field(
        default=1.0,
        gt=0,
        description="Seconds between two scheduling cycles of `forgeml server`.",
    )
    user: str | None = Field(
        default=None,
        description="Actor recorded in the audit log; default the login name.",
    )
    project: str = Field(
        default="default",
        description="Project that new datasets, runs, models, jobs, deployments, prompts, "
        "RAG indexes, pipelines and agent runs belong to, and that lists show.",
    )

    @field_validator("project")
    @classmethod
    def _plain_project(cls, value: str) -> str:
        from forgeml.core.errors import InvalidNameError
        from forgeml.core.ids import validate_name

        try:
            return validate_name(value, "project")
        except InvalidNameError as error:
            # pydantic reports a ValueError as a validation error naming the field
            raise ValueError(str(error)) from None

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
    """The process-wide settings, read from the environment once.

    Raises:
        ConfigError: a FORGEML_ variable holds a value its field refuses (one sentence).
    """
    from pydantic import ValidationError

    from forgeml.core.errors import ConfigError

    try:
        return Settings()
    except ValidationError as error:
        first = error.errors()[0]
        name = f"FORGEML_{str(first['loc'][0]).upper()}"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{name}: {message}") from None
