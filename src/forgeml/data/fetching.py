"""Versions from source URLs: fetch, ingest, record; and the replay `data rebuild` runs.

A fetched version is an `ingest` version whose recipe also names its source: the URL
(credentials replaced by `***`), the source's kind, what it was asked for and what it read.
The raw bytes of a live source (a database, a web page, a crawl) are stored as a blob
beside the version, and `data rebuild` replays `ingest` from them: the source itself may
have changed since. A source that is not live (an object store) is read again on rebuild
and must give the same bytes, as a local file must.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from forgeml.core.configfile import parse_model
from forgeml.core.errors import IntegrityError
from forgeml.core.ids import validate_name
from forgeml.core.store import DatasetVersion
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data.ingest import IngestOptions, ingest
from forgeml.data.sources import Fetched, Source, SourceOptions, get_source, source_for


def add_from_url(
    workspace: Workspace,
    name: str,
    url: str,
    options: IngestOptions,
    source_options: SourceOptions,
    label: str | None = None,
    *,
    source: Source | None = None,
) -> catalog.Recorded:
    """Read `url` through its source and record the rows as a version of `name`.

    Args:
        workspace: where to record.
        name: the dataset.
        url: a database, web or fsspec URL (or, with `source`, what that source reads).
        options: how to ingest the bytes read (format 'auto' takes the source's).
        source_options: how to read the source.
        label: the label column, for the quality report.
        source: the source to use; default `source_for(url)`.

    Raises:
        SourceError, NotFoundError, QueryNotAllowedError, UnsafeUrlError: the source
            cannot be read as asked (nothing is recorded then).
    """
    validate_name(name, "dataset name")
    source = source or source_for(url)
    with tempfile.TemporaryDirectory(prefix="forgeml-source-") as tmp:
        fetched = source.fetch(url, source_options, Path(tmp))
        with workspace.artifacts.local_tempfile(suffix=".parquet") as temp:
            result = ingest(
                source.readable(fetched, Path(tmp)), temp, _with_format(options, fetched)
            )
            params: dict[str, Any] = {
                "source": source.recorded_url(url),  # never a password or token
                "source_kind": source.kind,
                "source_options": _recorded_options(source_options),
                "fetched": fetched.params,
                "live": fetched.live,
                "source_digest": result.source_digest,
                "options": result.resolved.model_dump(mode="json"),
            }
            recipe = {"op": "ingest", "params": params}
            report = {
                "format": result.format,
                "rows": result.rows,
                "bad_row_count": result.bad_row_count,
                "bad_rows": result.bad_rows,
            }
            prepared = catalog.prepare(
                workspace, catalog.NewVersion(name, temp, recipe, report=report, label=label)
            )
        recorded_url = source.recorded_url(url)
        # a URL whose secrets are not recorded cannot be read again: keep its bytes
        if fetched.live or (recorded_url != url and fetched.raw.is_file()):
            params["live"] = True
            # kept only once the rows are good: a live source cannot be asked again
            params["raw"] = {
                "digest": workspace.artifacts.put_file(fetched.raw),
                "name": fetched.raw.name,
            }
        with workspace.store.session() as session:
            return catalog.record(workspace, session, prepared)


def is_fetched(version: DatasetVersion) -> bool:
    """Whether `version` was ingested from a source URL (not a local file)."""
    return version.recipe.get("op") == "ingest" and "source_kind" in version.recipe["params"]


def replay(workspace: Workspace, version: DatasetVersion, out: Path) -> None:
    """Write `version`'s canonical Parquet to `out` again: from its kept raw bytes when the
    source is live, else by reading the source again.

    Raises:
        IntegrityError: the source now gives different bytes, or the kept raw bytes do.
    """
    params = version.recipe["params"]
    source = get_source(params["source_kind"])
    options = parse_model(IngestOptions, params["options"], f"ingest recipe of {version.ref}")
    with tempfile.TemporaryDirectory(prefix="forgeml-source-") as tmp:
        if params.get("raw"):
            raw = Path(tmp) / params["raw"]["name"]
            raw.symlink_to(workspace.artifacts.local_path(params["raw"]["digest"]))
            fetched = Fetched(raw, options.format, live=True, params=params["fetched"])
        else:
            source_options = SourceOptions.model_validate(params["source_options"])
            fetched = source.fetch(params["source"], source_options, Path(tmp))
        result = ingest(source.readable(fetched, Path(tmp)), out, options)
    if result.source_digest != params["source_digest"]:
        raise IntegrityError(
            f"Cannot rebuild {version.ref}: its source {params['source']} changed since it "
            "was read."
        )


def _with_format(options: IngestOptions, fetched: Fetched) -> IngestOptions:
    if options.format == "auto" and fetched.format != "auto":
        return options.model_copy(update={"format": fetched.format})
    return options


def _recorded_options(options: SourceOptions) -> dict[str, Any]:
    return options.model_dump(mode="json", exclude_defaults=True)
