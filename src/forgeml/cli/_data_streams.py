"""`forgeml data ingest-stream`: one window of an MQTT, NATS, AMQP or Redis stream."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from forgeml.cli._output import print_json, say
from forgeml.data.streams.options import StreamOptions

_FIELDS = StreamOptions.model_fields


def _help(field: str) -> str:
    return _FIELDS[field].description or ""


def _progress(count: int) -> None:
    # one plain line per received batch on stderr: a person or a supervisor sees progress
    sys.stderr.write(f"received {count} records\n" if count else "subscribed\n")
    sys.stderr.flush()


def ingest_stream(
    name: Annotated[str, typer.Argument(help="Dataset name; also names the durable consumer.")],
    url: Annotated[
        str,
        typer.Argument(
            help="mqtt://HOST[:PORT]/TOPIC, nats://HOST[:PORT]/SUBJECT, "
            "amqp://USER:PASSWORD@HOST[:PORT]/QUEUE or redis://HOST[:PORT]/STREAM."
        ),
    ],
    max_records: Annotated[int, typer.Option(help=_help("max_records"))] = _FIELDS[
        "max_records"
    ].default,
    max_seconds: Annotated[float, typer.Option(help=_help("max_seconds"))] = _FIELDS[
        "max_seconds"
    ].default,
    payload: Annotated[str, typer.Option(help=_help("payload"))] = _FIELDS["payload"].default,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Receive one bounded window of a stream as a new version of NAME (exactly once)."""
    from forgeml.core.configfile import parse_model
    from forgeml.core.workspace import open_workspace
    from forgeml.data import catalog
    from forgeml.data.streams import ingest_stream as run_window

    fields = {"max_records": max_records, "max_seconds": max_seconds, "payload": payload}
    options = parse_model(StreamOptions, fields, "options")
    workspace = open_workspace()
    try:
        result = run_window(workspace, name, url, options, on_progress=_progress)
    finally:
        workspace.close()
    summary = catalog.recorded_summary(result.recorded) if result.recorded else None
    if as_json:
        print_json({"version": summary, "records": result.records, "dropped": result.dropped})
        return
    if summary is None:
        say(f"no new records from {result.source} in the window; no version recorded")
        return
    verb = "added" if summary["created"] else "unchanged: identical content is"
    kind = "JSON rows" if result.payload_format == "json" else "raw payloads in a bytes column"
    say(f"{verb} {summary['ref']} ({result.records} records as {kind}, from {result.source})")
    if result.dropped:
        say(f"dropped {result.dropped} redelivered records already in a committed version")


def register(app: typer.Typer) -> None:
    """Add `ingest-stream` to the `data` group."""
    app.command("ingest-stream")(ingest_stream)
