"""A command group whose commands import their module only when one is run or asked for help.

Building typer's whole command tree means importing every command module and reading every
signature; `forgeml data list` needs one module, and `forgeml --help` none: its listing
shows each command's `summary` from the registry (a test holds it equal to the command's
own help).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command, get_group

if TYPE_CHECKING:
    from typer._click.core import Command


@dataclass(frozen=True)
class LazyCommand:
    """A command by name: `target` is `module:attribute`, a `typer.Typer` or a function."""

    name: str
    target: str
    summary: str

    def load(self) -> Command:
        """The click command `target` names, built by typer."""
        module, attribute = self.target.split(":")
        found = getattr(import_module(module), attribute)
        command: Command
        if isinstance(found, typer.Typer):
            command = get_group(found)
        else:
            single = typer.Typer(add_completion=False)
            single.command(self.name)(found)
            command = get_command(single)
        command.name = self.name
        return command


class LazyGroup(TyperGroup):
    """A `TyperGroup` whose commands are `LazyCommand`s, each loaded once, on first use."""

    def __init__(self, *, lazy_commands: Sequence[LazyCommand], **attrs: Any) -> None:
        super().__init__(**attrs)
        self.lazy_commands = {entry.name: entry for entry in lazy_commands}
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        eager = [name for name in super().list_commands(ctx) if name not in self.lazy_commands]
        return [*self.lazy_commands, *eager]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = self.lazy_commands.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        if self._listing:  # the help's listing reads only names and summaries
            return TyperCommand(name=entry.name, help=entry.summary)
        if cmd_name not in self.commands:
            self.commands[cmd_name] = entry.load()
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with self._summaries_only():
            super().format_help(ctx, formatter)

    @contextmanager
    def _summaries_only(self) -> Iterator[None]:
        self._listing = True
        try:
            yield
        finally:
            self._listing = False
