"""The local side of the gateway API keys' seam (`forgeml.sdk.keys`, `forgeml keys`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from datetime import datetime
from typing import Any

from forgeml.core.workspace import open_workspace

Items = list[dict[str, Any]]  # named: the `list` method below would shadow the type


class LocalKeys:
    """The local workspace's keys, as `forgeml.client.Keys` answers them remotely."""

    def create(
        self,
        name: str,
        scopes: Sequence[str] | None = None,
        rate_per_s: float | None = None,
        burst: int | None = None,
        daily_quota: int | None = None,
    ) -> dict[str, Any]:
        from forgeml.gateway import create_key

        scoped = list(scopes) if scopes is not None else None
        with closing(open_workspace()) as workspace:
            summary, secret = create_key(workspace, name, scoped, rate_per_s, burst, daily_quota)
            return {**summary, "key": secret}

    def list(self) -> Items:
        from forgeml.gateway import list_keys

        with closing(open_workspace()) as workspace:
            return list_keys(workspace)

    def revoke(self, key: str) -> dict[str, Any]:
        from forgeml.gateway import revoke_key

        with closing(open_workspace()) as workspace:
            return revoke_key(workspace, key)

    def usage(self, since: datetime | None = None) -> Items:
        """Requests, errors and rejections per key and deployment from `since` (UTC) on, as
        the gateways flushed them (`keys usage --json`)."""
        from forgeml.gateway import usage_report

        with closing(open_workspace()) as workspace:
            return usage_report(workspace, since)
