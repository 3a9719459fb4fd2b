"""`forgeml init` and `forgeml demo`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forgeml.cli._output import say


def init() -> None:
    """Create FORGEML_HOME with its database (migrated) and artifact store."""
    from forgeml.core.workspace import open_workspace

    workspace = open_workspace()
    workspace.settings.home.mkdir(parents=True, exist_ok=True)
    _ = workspace.store, workspace.artifacts
    say(f"forgeml home: {workspace.settings.home.resolve()}")
    say(f"metadata:     {workspace.store.engine.url.render_as_string()}")
    say(f"artifacts:    {workspace.artifacts.url}")


def demo(
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder holding adult/ (adult.data and adult.test, plain or compressed); "
            "default: the copy shipped with forgeml."
        ),
    ] = None,
    loop: Annotated[
        bool,
        typer.Option(
            "--loop/--no-loop",
            help="Also run the closed loop: drift -> alert -> retrain -> gate -> canary -> "
            "promote, against a `forgeml server` the demo starts (a few minutes).",
        ),
    ] = True,
) -> None:
    """Run the main job end to end on the embedded default (Adult census data)."""
    from forgeml.cli.demo import run_demo

    run_demo(data_dir, loop)
