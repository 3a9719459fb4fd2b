"""`forgeml data ...`: ingest, inspect, query and export dataset versions."""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli import _data_streams, _data_transforms
from forgeml.cli._output import print_json, print_table, say, step, when
from forgeml.cli._remote import source

app = typer.Typer(help="Versioned datasets and their pipelines.", no_args_is_help=True)
_data_transforms.register(app)
_data_streams.register(app)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
SplitOption = Annotated[
    str | None, typer.Option("--split", help="Only this split: train, validation or test.")
]


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


Items = list[dict[str, Any]]  # named: the `list` method below would shadow the type


class _LocalDatasets:
    """The local dataset catalog, as `forgeml.client.Datasets` answers it remotely."""

    def list(self) -> list[dict[str, Any]]:
        from forgeml.data import catalog

        with closing(_workspace()) as workspace, workspace.store.session() as session:
            return [catalog.version_summary(v) for _, v in catalog.list_datasets(session)]

    def versions(self, name: str) -> Items:
        from forgeml.data import catalog

        with closing(_workspace()) as workspace, workspace.store.session() as session:
            return [catalog.version_summary(v) for v in catalog.versions_of(session, name)]

    def show(self, ref: str) -> dict[str, Any]:
        from forgeml.data import catalog

        with closing(_workspace()) as workspace:
            return catalog.describe(workspace, ref)

    def upload(self, name: str, path: Path, **options: Any) -> dict[str, Any]:
        from forgeml.data import catalog
        from forgeml.data.ingest import IngestOptions
        from forgeml.data.pipeline import add as add_version

        label = options.pop("label", None)
        parsed = IngestOptions.model_validate(options)
        with closing(_workspace()) as workspace:
            return catalog.recorded_summary(add_version(workspace, name, path, parsed, label))


def _datasets() -> Any:
    return source(lambda client: client.datasets, _LocalDatasets)


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    path: Annotated[Path, typer.Argument(help="CSV/TSV/JSONL/Parquet file, or a folder.")],
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
    as_json: JsonFlag = False,
) -> None:
    """Ingest a file or folder as a new immutable version of NAME."""
    from forgeml.core.configfile import parse_model
    from forgeml.data.ingest import IngestOptions

    fields = {
        "format": file_format,
        "delimiter": delimiter,
        "header": header,
        "names": names,
        "on_bad_rows": on_bad_rows,
    }
    parse_model(IngestOptions, fields, "options")  # the same sentence locally and remotely
    given = {key: value for key, value in fields.items() if value is not None}
    with step(f"ingesting {path}"):
        summary = _datasets().upload(name, path, **given, **({"label": label} if label else {}))
    if as_json:
        print_json(summary)
        return
    verb = "added" if summary["created"] else "unchanged: identical content is"
    say(f"{verb} {summary['ref']} ({summary['rows']} rows, digest {summary['digest'][:12]})")
    bad = summary["report"].get("bad_row_count", 0)
    if bad:
        lines = ", ".join(map(str, summary["report"]["bad_rows"][:10]))
        say(f"skipped {bad} malformed rows (lines {lines}{', ...' if bad > 10 else ''})")


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
    from forgeml.data import catalog

    workspace = _workspace()
    with workspace.store.session() as session:
        version = catalog.resolve(session, ref)
    frame = catalog.read_frame(workspace, version, split).head(n)
    if as_json:
        print_json(frame.to_dicts())
        return
    import polars as pl

    say(version.ref)
    with pl.Config(tbl_rows=n, tbl_cols=12, fmt_str_lengths=40):
        sys.stdout.write(f"{frame}\n")


@app.command("diff")
def diff(
    ref_a: Annotated[str, typer.Argument(help="The older version.")],
    ref_b: Annotated[str, typer.Argument(help="The newer version.")],
    as_json: JsonFlag = False,
) -> None:
    """Schema, row-count and per-column statistic changes between two versions."""
    from forgeml.data import catalog, quality

    workspace = _workspace()
    with workspace.store.session() as session:
        a, b = catalog.resolve(session, ref_a), catalog.resolve(session, ref_b)
    changes = quality.diff(catalog.profile_of(workspace, a), catalog.profile_of(workspace, b))
    if as_json:
        print_json({"from": a.ref, "to": b.ref, **changes})
        return
    from forgeml.cli._profile_view import print_diff

    print_diff(a.ref, b.ref, changes)


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
    from forgeml.data import catalog
    from forgeml.data.export import export_frame

    workspace = _workspace()
    with workspace.store.session() as session:
        version = catalog.resolve(session, ref)
    frame = catalog.read_frame(workspace, version, split)
    written = export_frame(frame, path, file_format)
    say(f"wrote {frame.height} rows of {version.ref} to {path} ({written})")


@app.command("query")
def query(
    sql: Annotated[str, typer.Argument(help='One SELECT; datasets by name or "NAME@vN".')],
    limit: Annotated[int, typer.Option(help="Show at most this many rows.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """Read-only SQL (DuckDB) over the datasets."""
    from forgeml.data.query import run_query

    table = run_query(_workspace(), sql, limit)
    if as_json:
        print_json(table.to_pylist())
        return
    print_table(None, table.column_names, [list(row.values()) for row in table.to_pylist()])


@app.command("rebuild")
def rebuild(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@<digest>.")],
) -> None:
    """Re-derive a version from its parent and recipe; exit 1 unless the digest matches."""
    from forgeml.data.pipeline import rebuild as rebuild_version

    with step(f"rebuilding {ref}"):
        result = rebuild_version(_workspace(), ref)
    say(f"rebuilt {result.ref}: digest {result.actual[:12]} matches")
