"""The Python SDK over the control-plane API: `Client(server, token)`.

`Client.from_env()` reads `FORGEML_SERVER` and `FORGEML_TOKEN`, as the CLI's remote mode
does. Every answer is what the matching `forgeml ... --json` command prints.

`Client` and its resources load on first use (PEP 562): httpx costs ~150 ms to import, and
the CLI asks `RemoteSettings` on every start.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from forgeml.client._settings import RemoteSettings

if TYPE_CHECKING:
    from forgeml.client._accounts import Projects, Tokens, Users
    from forgeml.client._client import Client
    from forgeml.client._commands import Commands
    from forgeml.client._labels import Labels
    from forgeml.client._registries import Agents, Pipelines, Prompts, Rag
    from forgeml.client._resources import (
        Alerts,
        Audit,
        Cost,
        Datasets,
        Deployments,
        Jobs,
        Keys,
        Models,
        Queues,
        Runs,
    )

__all__ = [
    "Agents", "Alerts", "Audit", "Client", "Commands", "Cost", "Datasets", "Deployments",
    "Jobs", "Keys", "Labels", "Models", "Pipelines", "Projects", "Prompts", "Queues", "Rag",
    "RemoteSettings", "Runs", "Tokens", "Users",
]  # fmt: skip

_LAZY = (
    {"Client": "forgeml.client._client"}
    | dict.fromkeys(
        (
            "Alerts",
            "Audit",
            "Cost",
            "Datasets",
            "Deployments",
            "Jobs",
            "Keys",
            "Models",
            "Queues",
            "Runs",
        ),
        "forgeml.client._resources",
    )
    | dict.fromkeys(("Agents", "Pipelines", "Prompts", "Rag"), "forgeml.client._registries")
    | dict.fromkeys(("Projects", "Tokens", "Users"), "forgeml.client._accounts")
    | {"Labels": "forgeml.client._labels", "Commands": "forgeml.client._commands"}
)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'forgeml.client' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
