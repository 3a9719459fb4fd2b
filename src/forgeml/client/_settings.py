"""Where the CLI and the SDK find a server; importing it does not import httpx, so the CLI
can ask whether it is in remote mode without paying for an HTTP client."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class RemoteSettings(BaseSettings):
    """`FORGEML_SERVER` and `FORGEML_TOKEN`: remote mode when a server is set."""

    model_config = SettingsConfigDict(env_prefix="FORGEML_", extra="ignore")

    server: str | None = Field(None, description="The control plane's URL (remote mode).")
    token: str | None = Field(None, description="An API token, `fmlt_<id>_<secret>`.")
