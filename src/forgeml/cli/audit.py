"""`forgeml audit log|verify`."""

from __future__ import annotations

from typing import Annotated

import typer

from forgeml.cli._output import print_json, print_table, say, when

app = typer.Typer(help="The hash-chained audit log of every change.", no_args_is_help=True)


@app.command("log")
def log(
    limit: Annotated[int, typer.Option(help="Show at most this many latest events.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """List audit events, newest last."""
    from sqlalchemy import select

    from forgeml.core import audit
    from forgeml.core.store import AuditEvent
    from forgeml.core.workspace import open_workspace

    workspace = open_workspace()
    with workspace.store.session() as session:
        events = list(
            session.scalars(select(AuditEvent).order_by(AuditEvent.seq.desc()).limit(limit))
        )[::-1]
    if as_json:
        print_json([audit.event_summary(e) for e in events])
        return
    rows = [(e.seq, when(e.at), e.actor, e.action, e.object_ref, e.hash[:12]) for e in events]
    print_table("audit log", ["#", "at", "actor", "action", "object", "hash"], rows)


@app.command("verify")
def verify() -> None:
    """Check the hash chain and its signed checkpoint; exit 1 naming what is broken or
    missing. An intact chain's head is then checkpointed."""
    from forgeml.core.workspace import open_workspace

    result = open_workspace().verify_audit()
    say(f"audit log intact: {result.events} events, head {result.head[:12]}")
