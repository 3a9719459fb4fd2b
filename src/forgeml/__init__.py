"""forgeml: an AI training platform in one Python package.

The SDK mirrors the CLI: `forgeml.sdk`'s resources (`runs`, `models`, `datasets`, `jobs`,
`queues`, `audit`, `prompts`, `labels`) follow `FORGEML_SERVER`, answering through the
server when it is set and from the local workspace when not, the same values either way.
`forgeml.connect()` is the same seam for many calls: with `FORGEML_SERVER` set it answers
the control plane's `forgeml.client.Client` (its token `FORGEML_TOKEN`), else the local
workspace. The domain functions (`forgeml.data.pipeline`, `forgeml.data.catalog`,
`forgeml.tracking`, ...) take a local `Workspace`: `forgeml.open_workspace()` opens the one
the environment describes, and refuses while `FORGEML_SERVER` names a server's store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forgeml.core.errors import UsageError
from forgeml.core.workspace import Workspace
from forgeml.core.workspace import open_workspace as _open_local

if TYPE_CHECKING:
    from forgeml.client import Client
    from forgeml.core.config import Settings

__all__ = ["Workspace", "connect", "open_workspace"]
__version__ = "0.1.0"


def connect() -> Client | Workspace:
    """The store the environment names: the server's `Client` when `FORGEML_SERVER` is set
    (remote mode; close it when done), else the local workspace (`open_workspace()`).

    Raises:
        ConfigError: `FORGEML_SERVER` is not an http(s) URL.
    """
    from forgeml.client import Client

    client = Client.from_env()
    return client if client is not None else open_workspace()


def open_workspace(settings: Settings | None = None) -> Workspace:
    """The local workspace `settings` describe (default: the environment's).

    Raises:
        UsageError: no `settings` were given and `FORGEML_SERVER` is set: the environment
            names the server's store, which only `connect()` (its `Client`) reaches; a
            workspace opened here would silently be another one.
    """
    from forgeml.client import RemoteSettings

    if settings is None and RemoteSettings().server:
        raise UsageError(
            "FORGEML_SERVER is set, so the workspace is the server's: use forgeml.sdk or "
            "forgeml.connect() (its Client), or unset FORGEML_SERVER to open the local "
            "workspace."
        )
    return _open_local(settings)
