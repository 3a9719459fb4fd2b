"""One identity provider's settings, and the roles its groups grant per project."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from forgeml.core.configfile import describe_validation_error, load_yaml_model
from forgeml.core.errors import ConfigError

Role = Literal["owner", "admin", "maintainer", "developer", "viewer"]
ROLES: tuple[Role, ...] = ("owner", "admin", "maintainer", "developer", "viewer")  # highest first


class OidcConfig(BaseSettings):
    """One OpenID Connect provider. Every field can be set as `FORGEML_OIDC_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="FORGEML_OIDC_", extra="forbid")

    issuer: str = Field(description="The provider's issuer URL, as its discovery document says.")
    client_id: str = Field(min_length=1, description="forgeml's client id at the provider.")
    client_secret_env: str | None = Field(
        default="FORGEML_OIDC_CLIENT_SECRET",
        description="Environment variable holding the client secret; null for a public client.",
    )
    redirect_uri: str = Field(description="forgeml's callback URL, registered at the provider.")
    scopes: list[str] = Field(default=["openid", "email", "profile", "groups"])
    groups_claim: str = Field(
        default="groups", description="ID-token claim with the groups; dotted for nested ones."
    )
    group_roles: dict[str, dict[str, Role]] = Field(
        default_factory=dict, description="Per project, the role each provider group grants."
    )
    extra_origins: list[str] = Field(
        default_factory=list,
        description="Origins besides the issuer's that the token endpoint or JWKS may sit on.",
    )
    allow_private_network: bool = Field(
        default=False,
        description="Let the provider be on a private or loopback address, over http too.",
    )
    clock_skew_s: int = Field(default=60, ge=0, description="Leeway on the ID token's times.")
    login_ttl_s: int = Field(default=600, gt=0, description="Seconds a sign-in may take.")
    timeout_s: float = Field(default=10.0, gt=0, description="Seconds one provider call may take.")

    @field_validator("issuer", "redirect_uri")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError for a port out of range
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.fragment:
            raise ValueError(f"an http(s) URL with a host and no fragment is needed, not {value!r}")
        return value

    @field_validator("extra_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            parts = urlsplit(origin)
            _ = parts.port
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/"):
                raise ValueError(f"an origin is scheme://host[:port], not {origin!r}")
        return value

    @field_validator("scopes")
    @classmethod
    def _openid_scope(cls, value: list[str]) -> list[str]:
        if "openid" not in value:
            raise ValueError("the scopes must include 'openid'")
        return value

    def client_secret(self) -> str | None:
        """The client secret, read from `client_secret_env` (None for a public client)."""
        if self.client_secret_env is None:
            return None
        secret = os.environ.get(self.client_secret_env)
        if not secret:
            raise ConfigError(f"The OIDC client secret variable {self.client_secret_env} is unset.")
        return secret


def load_oidc_config(path: str | Path | None = None) -> OidcConfig:
    """The OIDC settings from a YAML file, or else from `FORGEML_OIDC_*` variables.

    Raises:
        ConfigError: a missing or invalid file or variable, named with its key.
    """
    if path is not None:
        return load_yaml_model(path, OidcConfig)
    try:
        return OidcConfig()
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, "FORGEML_OIDC_* settings")) from None


def roles_for_groups(
    group_roles: Mapping[str, Mapping[str, Role]], groups: Iterable[str]
) -> dict[str, Role]:
    """Per project, the highest role any of `groups` grants; projects none grants are left out."""
    member = set(groups)
    roles: dict[str, Role] = {}
    for project, by_group in group_roles.items():
        granted = [by_group[group] for group in member if group in by_group]
        if granted:
            roles[project] = min(granted, key=ROLES.index)
    return roles
