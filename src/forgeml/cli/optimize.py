"""`forgeml optimize` (issue 5; being written)."""

from __future__ import annotations

from forgeml.core.errors import UsageError


def optimize() -> None:
    """Not built yet."""
    raise UsageError("forgeml optimize is not built yet.")
