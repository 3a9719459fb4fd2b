"""`forgeml audit log|verify`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalAudit

app = typer.Typer(help="The hash-chained audit log of every change.", no_args_is_help=True)


def _audit() -> Any:
    return source(lambda client: client.audit, LocalAudit)


@app.command("log")
def log(
    limit: Annotated[int, typer.Option(help="Show at most this many latest events.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """List audit events, newest last."""
    events = _audit().latest(limit)
    if as_json:
        print_json(events)
        return
    rows = [
        (e["seq"], when(e["at"]), e["actor"], e["action"], e["object"], e["hash"][:12])
        for e in events
    ]
    print_table("audit log", ["#", "at", "actor", "action", "object", "hash"], rows)


@app.command("verify")
def verify() -> None:
    """Check the hash chain and its signed checkpoint; exit 1 naming what is broken or
    missing. An intact chain's head is then checkpointed."""
    result = _audit().verify()
    say(f"audit log intact: {result['events']} events, head {result['head'][:12]}")
