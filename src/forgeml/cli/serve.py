"""`forgeml serve` (issue 5; being written)."""

from __future__ import annotations

from forgeml.core.errors import UsageError


def serve() -> None:
    """Not built yet."""
    raise UsageError("forgeml serve is not built yet.")
