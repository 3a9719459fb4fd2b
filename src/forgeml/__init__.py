"""forgeml: an AI training platform in one Python package.

The SDK mirrors the CLI: `forgeml.data` holds the dataset operations
(`add`, `derive`, `rebuild`, `catalog.resolve`, `catalog.read_frame`, `catalog.profile_of`,
`run_query`) and `forgeml.open_workspace()` opens the store the environment describes.
`forgeml.connect()` is the seam of remote mode, as the CLI's: with `FORGEML_SERVER` set it
answers the control plane's `forgeml.client.Client` (its token `FORGEML_TOKEN`), else the
local workspace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forgeml.core.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from forgeml.client import Client

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
