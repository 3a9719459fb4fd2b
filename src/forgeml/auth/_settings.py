"""Account settings, read once from the environment (`FORGEML_AUTH_<NAME>`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from forgeml.core.errors import ConfigError


class AuthSettings(BaseSettings):
    """How sign-in works: password hashing cost, sessions, login limits, proxies."""

    model_config = SettingsConfigDict(env_prefix="FORGEML_AUTH_", extra="ignore")

    # Argon2id's cost; the defaults are RFC 9106's second recommended option (64 MiB)
    argon2_time_cost: int = Field(default=3, ge=1, description="Argon2id passes.")
    argon2_memory_kib: int = Field(
        default=65536, ge=8, description="Argon2id memory per hash, in KiB."
    )
    argon2_parallelism: int = Field(default=4, ge=1, description="Argon2id lanes.")
    session_hours: float = Field(
        default=12.0, gt=0, description="Hours a password sign-in's session cookie lasts."
    )
    login_window_s: float = Field(
        default=900.0, gt=0, description="Seconds over which failed sign-ins are counted."
    )
    login_failures_per_user: int = Field(
        default=5, ge=1, description="Failed sign-ins for one account before it must wait."
    )
    login_failures_per_address: int = Field(
        default=20, ge=1, description="Failed sign-ins from one address before it must wait."
    )
    token_last_used_every_s: float = Field(
        default=60.0,
        ge=0,
        description="Seconds between two writes of a token's last-used time: the requests "
        "in between only read the store (0: every request writes it).",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses of the reverse proxies in front of the server; only a request "
        "from one of them is placed by its X-Forwarded-For (empty: never read).",
    )
    session_key_file: Path | None = Field(
        default=None,
        description="File holding the session-signing key (made at first use, mode 0600); "
        "default: none, the key is kept in the metadata store, shared by every server of "
        "the database.",
    )

    @model_validator(mode="after")
    def _argon2_memory_fits_lanes(self) -> AuthSettings:
        if self.argon2_memory_kib < 8 * self.argon2_parallelism:
            raise ValueError(
                "FORGEML_AUTH_ARGON2_MEMORY_KIB must be at least 8 KiB per lane "
                f"(FORGEML_AUTH_ARGON2_PARALLELISM={self.argon2_parallelism})."
            )
        return self


@lru_cache(maxsize=1)
def get_auth_settings() -> AuthSettings:
    """The process-wide account settings, read from the environment once.

    Raises:
        ConfigError: a setting is invalid (the first problem, named).
    """
    try:
        return AuthSettings()
    except ValidationError as error:
        first = error.errors()[0]
        where = "FORGEML_AUTH_" + "_".join(str(part) for part in first["loc"]).upper()
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{where}: {message}" if first["loc"] else message) from None
