"""`forgeml deploy` (issue 5; being written)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Not built yet.", no_args_is_help=True)
