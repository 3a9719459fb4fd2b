"""`forgeml data add NAME URL` and `forgeml data crawl NAME URL`: versions from sources.

The flags are the fields of `forgeml.data.sources.SourceOptions` (their help is the field's
description); a flag left out takes the field's default. Sources run beside the workspace:
in remote mode a URL is refused, since the server would fetch it from its own network.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, say, step
from forgeml.data.sources.base import SourceOptions

_FIELDS = SourceOptions.model_fields


def _help(name: str) -> str:
    return _FIELDS[name].description or ""  # one source of truth: the option's own field


Table = Annotated[str | None, typer.Option(help=_help("table"))]
Query = Annotated[str | None, typer.Option(help=_help("query"))]
ChunkRows = Annotated[int | None, typer.Option(help=_help("chunk_rows"))]
JsonPath = Annotated[str | None, typer.Option(help=_help("json_path"))]
Next = Annotated[str | None, typer.Option("--next", help=_help("next"))]
Cursor = Annotated[str | None, typer.Option(metavar="PARAM=PATH", help=_help("cursor"))]
MaxPages = Annotated[int | None, typer.Option(help=_help("max_pages"))]
AllowPrivate = Annotated[bool, typer.Option("--allow-private", help=_help("allow_private"))]
Timeout = Annotated[float | None, typer.Option(help=_help("timeout"))]
Retries = Annotated[int | None, typer.Option(help=_help("retries"))]
MaxBytes = Annotated[int | None, typer.Option(help=_help("max_bytes"))]
SameHost = Annotated[bool, typer.Option("--same-host/--any-host", help=_help("same_host"))]
Rate = Annotated[float | None, typer.Option(help=_help("rate"))]


def source_options(fields: dict[str, Any]) -> SourceOptions:
    """The options from the flags given (None and False: left out)."""
    from forgeml.core.configfile import parse_model

    given = {key: value for key, value in fields.items() if value not in (None, False)}
    return parse_model(SourceOptions, given, "source options")


def add_url(
    name: str,
    url: str,
    ingest_fields: dict[str, Any],
    options: SourceOptions,
    label: str | None,
) -> dict[str, Any]:
    """Record the rows `url` gives as a version of `name`; what `data add --json` prints."""
    from forgeml.cli._remote import is_remote
    from forgeml.core.configfile import parse_model
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.data import catalog
    from forgeml.data.fetching import add_from_url
    from forgeml.data.ingest import IngestOptions

    if is_remote():
        raise UsageError(
            "`forgeml data add` reads a URL on this machine only; unset FORGEML_SERVER to "
            "read it here, or download it and add the file."
        )
    parsed = parse_model(IngestOptions, ingest_fields, "options")
    workspace = open_workspace()
    try:
        recorded = add_from_url(workspace, name, url, parsed, options, label)
        return catalog.recorded_summary(recorded)
    finally:
        workspace.close()


def register(app: typer.Typer) -> None:
    """Add `data crawl` to the `data` group."""
    app.command("crawl")(crawl)


def crawl(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    url: Annotated[str, typer.Argument(help="The start page (http or https).")],
    max_pages: MaxPages = 100,
    same_host: SameHost = True,
    rate: Rate = None,
    allow_private: AllowPrivate = False,
    timeout: Timeout = None,
    retries: Retries = None,
    max_bytes: MaxBytes = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Crawl from URL (robots.txt honoured) into a version of NAME: url, title, text,
    fetched_at per page."""
    from forgeml.cli._remote import is_remote
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.data import catalog
    from forgeml.data.fetching import add_from_url
    from forgeml.data.ingest import IngestOptions
    from forgeml.data.sources import get_source

    if is_remote():
        raise UsageError("`forgeml data crawl` runs on this machine only; unset FORGEML_SERVER.")
    fields = {
        "max_pages": max_pages,
        "rate": rate,
        "allow_private": allow_private,
        "timeout": timeout,
        "retries": retries,
        "max_bytes": max_bytes,
    }
    options = source_options(fields).model_copy(update={"same_host": same_host})
    workspace = open_workspace()
    try:
        with step(f"crawling {url}"):
            recorded = add_from_url(
                workspace, name, url, IngestOptions(), options, source=get_source("crawl")
            )
        summary = catalog.recorded_summary(recorded)
    finally:
        workspace.close()
    if as_json:
        print_json(summary)
        return
    fetched = summary["report"]
    verb = "added" if summary["created"] else "unchanged: identical content is"
    say(f"{verb} {summary['ref']} ({fetched['rows']} pages, digest {summary['digest'][:12]})")
