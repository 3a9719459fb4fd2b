"""`forgeml models card`'s two sides: the local workspace, or the API in remote mode.

Both answer what `models card --json` prints (`forgeml.governance.cards.card_summary`), so
the command prints one way whichever side made the card.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

from forgeml.cli._remote import source
from forgeml.core.errors import UsageError


class LocalCards:
    """Model cards from the local workspace, as `forgeml.client.Models` answers remotely."""

    def card(self, ref: str, card_format: str = "md") -> dict[str, Any]:
        from forgeml.core.workspace import open_workspace
        from forgeml.governance.cards import card_summary

        with closing(open_workspace()) as workspace:
            return card_summary(workspace, ref, card_format)

    def set_card(
        self, ref: str, intended_use: str | None = None, limitations: str | None = None
    ) -> dict[str, Any]:
        from forgeml.core.workspace import open_workspace
        from forgeml.governance.cards import set_card_notes

        with closing(open_workspace()) as workspace:
            return set_card_notes(workspace, ref, intended_use, limitations)


def cards() -> Any:
    return source(lambda client: client.models, LocalCards)


def write_card(path: Path, text: str) -> None:
    """Write the card to `path` atomically (its folder made if missing).

    Raises:
        UsageError: `path` is a folder or cannot be written.
    """
    from forgeml.core.atomic import atomic_write_text

    check_output(path)
    try:
        atomic_write_text(path, text)
    except OSError as error:
        raise UsageError(f"Cannot write the card to {path}: {error.strerror}.") from None


def check_output(path: Path) -> None:
    """Raises UsageError when `path` is a folder (checked before anything is recorded)."""
    if path.is_dir():
        raise UsageError(f"--output {path} is a folder; give a file name such as README.md.")
