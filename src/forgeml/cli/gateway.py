"""`forgeml gateway` (issue 5; being written)."""

from __future__ import annotations

from forgeml.core.errors import UsageError


def gateway() -> None:
    """Not built yet."""
    raise UsageError("forgeml gateway is not built yet.")
