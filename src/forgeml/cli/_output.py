"""How commands print: JSON for machines, Rich tables for people, one line for errors."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError


def print_json(payload: Any) -> None:
    """Machine-readable output: JSON only on stdout."""
    sys.stdout.write(
        orjson.dumps(
            payload, default=_default, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
        ).decode()
        + "\n"
    )
    sys.stdout.flush()


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    console.print(table)


def say(message: str) -> None:
    """A line for a person (on stderr when stdout is a pipe, so JSON stays clean)."""
    console.print(message, highlight=False)


@contextmanager
def step(description: str) -> Iterator[None]:
    """A spinner on a terminal, plain start/finish log lines otherwise."""
    if err_console.is_terminal:
        with err_console.status(description):
            yield
        return
    # one line when it is done, so a failure leaves only the error on stderr
    started = time.perf_counter()
    yield
    print(f"{description}: done in {time.perf_counter() - started:.2f}s", file=sys.stderr)


def when(moment: datetime | str) -> str:
    if isinstance(moment, str):  # remote mode prints the API's JSON, where it is ISO 8601
        moment = datetime.fromisoformat(moment)
    return moment.strftime("%Y-%m-%d %H:%M:%S")
