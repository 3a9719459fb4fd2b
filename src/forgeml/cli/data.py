"""`forgeml data ...`: ingest, inspect, query and export dataset versions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli import _data_sources, _data_streams, _data_transforms
from forgeml.cli._output import print_json, print_table, say, step, when
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalDatasets

app = typer.Typer(help="Versioned datasets and their pipelines.", no_args_is_help=True)
_data_transforms.register(app)
_data_sources.register(app)
_data_streams.register(app)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
SplitOption = Annotated[
    str | None, typer.Option("--split", help="Only this split: train, validation or test.")
]


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


Items = list[dict[str, Any]]  # named: the `list` method below would shadow the type


def _datasets() -> Any:
    return source(lambda client: client.datasets, LocalDatasets)


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH_OR_URL",
            help="CSV/TSV/JSONL/Parquet file, or a folder; or a source URL: "
            "postgresql+psycopg://, mysql+pymysql://, http(s)://, s3:// or another fsspec URL.",
        ),
    ],
    file_format: Annotated[
        str, typer.Option("--format", help="auto, csv, tsv, jsonl, parquet, images, text.")
    ] = "auto",
    delimiter: Annotated[str | None, typer.Option(help="CSV delimiter (default: sniffed).")] = None,
    header: Annotated[
        bool | None, typer.Option("--header/--no-header", help="First row is a header.")
    ] = None,
    names: Annotated[
        str | None,
        typer.Option(
            help="CSV/TSV column names in order, comma-separated (e.g. label,text); "
            "implies --no-header unless --header is given (then they replace the header's)."
        ),
    ] = None,
    on_bad_rows: Annotated[
        str, typer.Option(help="fail: stop at malformed rows; skip: drop and report them.")
    ] = "fail",
    label: Annotated[str | None, typer.Option(help="Label column, for the quality report.")] = None,
    table: _data_sources.Table = None,
    query: _data_sources.Query = None,
    chunk_rows: _data_sources.ChunkRows = None,
    json_path: _data_sources.JsonPath = None,
    next_link: _data_sources.Next = None,
    cursor: _data_sources.Cursor = None,
    max_pages: _data_sources.MaxPages = None,
    allow_private: _data_sources.AllowPrivate = False,
    timeout: _data_sources.Timeout = None,
    retries: _data_sources.Retries = None,
    max_bytes: _data_sources.MaxBytes = None,
    as_json: JsonFlag = False,
) -> None:
    """Ingest a file, folder or source URL as a new immutable version of NAME."""
    from forgeml.core.configfile import parse_model
    from forgeml.core.errors import UsageError
    from forgeml.data.ingest import IngestOptions
    from forgeml.data.sources import is_url

    source_fields = {
        "table": table,
        "query": query,
        "chunk_rows": chunk_rows,
        "json_path": json_path,
        "next": next_link,
        "cursor": cursor,
        "max_pages": max_pages,
        "allow_private": allow_private,
        "timeout": timeout,
        "retries": retries,
        "max_bytes": max_bytes,
    }
    options = _data_sources.source_options(source_fields)
    if not is_url(path) and options.model_fields_set:
        flags = ", ".join("--" + key.replace("_", "-") for key in sorted(options.model_fields_set))
        raise UsageError(f"{flags} apply to a source URL only, not to the file {path}.")

    fields = {
        "format": file_format,
        "delimiter": delimiter,
        "header": header,
        "names": names,
        "on_bad_rows": on_bad_rows,
    }
    parse_model(IngestOptions, fields, "options")  # the same sentence locally and remotely
    given = {key: value for key, value in fields.items() if value is not None}
    with step(f"ingesting {_shown(path)}"):
        if is_url(path):
            summary = _data_sources.add_url(name, path, given, options, label)
        else:
            extra = {"label": label} if label else {}
            summary = _datasets().upload(name, Path(path), **given, **extra)
    if as_json:
        print_json(summary)
        return
    verb = "added" if summary["created"] else "unchanged: identical content is"
    say(f"{verb} {summary['ref']} ({summary['rows']} rows, digest {summary['digest'][:12]})")
    bad = summary["report"].get("bad_row_count", 0)
    if bad:
        lines = ", ".join(map(str, summary["report"]["bad_rows"][:10]))
        say(f"skipped {bad} malformed rows (lines {lines}{', ...' if bad > 10 else ''})")


def _shown(path: str) -> str:
    from forgeml.data.sources import is_url, source_for

    return source_for(path).recorded_url(path) if is_url(path) else path


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """List datasets with their latest version."""
    items = _datasets().list()
    if as_json:
        print_json(items)
        return
    rows = [
        (
            i["dataset"],
            f"v{i['version']}",
            i["rows"],
            i["digest"][:12],
            i["op"],
            when(i["created_at"]),
        )
        for i in items
    ]
    print_table("datasets", ["name", "latest", "rows", "digest", "made by", "created"], rows)


@app.command("versions")
def versions(
    name: Annotated[str, typer.Argument(help="Dataset name.")], as_json: JsonFlag = False
) -> None:
    """List every version of a dataset."""
    items = _datasets().versions(name)
    if as_json:
        print_json(items)
        return
    rows = [
        (
            i["ref"],
            i["rows"],
            i["digest"][:12],
            i["op"],
            ", ".join(i["parents"]),
            when(i["created_at"]),
        )
        for i in items
    ]
    print_table(f"versions of {name}", ["ref", "rows", "digest", "op", "parents", "created"], rows)


@app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest>.")],
    as_json: JsonFlag = False,
) -> None:
    """Schema, row count, quality report and lineage of a version."""
    detail = _datasets().show(ref)
    if as_json:
        print_json(detail)
        return
    _print_show(detail)


def _print_show(detail: dict[str, Any]) -> None:
    from forgeml.cli._profile_view import print_profile

    say(f"[bold]{detail['ref']}[/bold]  digest {detail['digest']}")
    say(f"rows {detail['rows']}  size {detail['size_bytes']:,} bytes  made by {detail['op']}")
    say(
        f"lineage: parents {', '.join(detail['parents']) or '(source)'}; "
        f"children {', '.join(detail['children']) or '(none)'}"
    )
    if detail["op"] in ("ingest", "ingest-stream"):
        say(f"source: {detail['recipe']['params']['source']}")
    print_profile(detail["profile"], detail["schema"])


@app.command("head")
def head(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest>.")],
    n: Annotated[int, typer.Option("-n", help="Number of rows.")] = 10,
    split: SplitOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the first rows of a version."""
    from forgeml.core.errors import UsageError

    if n < 0:
        raise UsageError(f"-n must be 0 or more, not {n}.")
    resolved, frame = _datasets().frame(ref, split, n)
    if as_json:
        print_json(frame.to_dicts())
        return
    import polars as pl

    say(resolved)
    with pl.Config(tbl_rows=n, tbl_cols=12, fmt_str_lengths=40):
        sys.stdout.write(f"{frame}\n")


@app.command("diff")
def diff(
    ref_a: Annotated[str, typer.Argument(help="The older version.")],
    ref_b: Annotated[str, typer.Argument(help="The newer version.")],
    as_json: JsonFlag = False,
) -> None:
    """Schema, row-count and per-column statistic changes between two versions."""
    changes = _datasets().diff(ref_a, ref_b)
    if as_json:
        print_json(changes)
        return
    from forgeml.cli._profile_view import print_diff

    print_diff(
        changes["from"],
        changes["to"],
        {k: v for k, v in changes.items() if k not in ("from", "to")},
    )


@app.command("export")
def export(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest>.")],
    path: Annotated[Path, typer.Argument(help="File to write.")],
    file_format: Annotated[
        str | None, typer.Option("--format", help="csv, parquet or jsonl (default: extension).")
    ] = None,
    split: SplitOption = None,
) -> None:
    """Write a version (or one split of it) to a file."""
    from forgeml.data.export import check_format, export_frame

    chosen = check_format(path, file_format)  # before any row is read or downloaded
    resolved, frame = _datasets().frame(ref, split)
    written = export_frame(frame, path, chosen)
    say(f"wrote {frame.height} rows of {resolved} to {path} ({written})")


@app.command("query")
def query(
    sql: Annotated[str, typer.Argument(help='One SELECT; datasets by name or "NAME@vN".')],
    limit: Annotated[int, typer.Option(help="Show at most this many rows.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """Read-only SQL (DuckDB) over the datasets."""
    from forgeml.core.errors import UsageError

    if not 1 <= limit <= 10_000:
        raise UsageError(f"--limit must be between 1 and 10000, not {limit}.")
    table = _datasets().query(sql, limit)
    if as_json:
        print_json(table["rows"])
        return
    print_table(None, table["columns"], [list(row.values()) for row in table["rows"]])


@app.command("rebuild")
def rebuild(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest>.")],
) -> None:
    """Re-derive a version from its parent and recipe (an upload from the bytes the store
    kept of it); exit 1 unless the digest matches."""
    with step(f"rebuilding {ref}"):
        result = _datasets().rebuild(ref)
    say(f"rebuilt {result['ref']}: digest {result['actual'][:12]} matches")
