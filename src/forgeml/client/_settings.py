"""Where the CLI and the SDK find a server; importing it does not import httpx, so the CLI
can ask whether it is in remote mode without paying for an HTTP client."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# the header naming the project a request acts in (the server's `request_project` reads it)
PROJECT_HEADER = "X-Forgeml-Project"


class RemoteSettings(BaseSettings):
    """`FORGEML_SERVER`, `FORGEML_TOKEN` and `FORGEML_PROJECT`: remote mode when a server is
    set."""

    model_config = SettingsConfigDict(env_prefix="FORGEML_", extra="ignore")

    server: str | None = Field(None, description="The control plane's URL (remote mode).")
    token: str | None = Field(None, description="An API token, `fmlt_<id>_<secret>`.")
    project: str | None = Field(
        None, description="The project to act in (sent as X-Forgeml-Project); default `default`."
    )
