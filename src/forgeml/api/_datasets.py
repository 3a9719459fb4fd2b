"""Dataset routes: list, show, versions, and upload a file as a new version.

Lists answer what `forgeml data list|versions --json` print, a page at a time (`_pages`);
`show` answers `data show --json`; an upload answers `data add --json`. An upload is the
request body itself (any content type), read to a temporary file under the app's size
limit (413 above it, nothing recorded), then ingested as `data add` ingests a file: its
format from `filename`'s extension unless `format` says, the version audited as the caller.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request, Response

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._limits import ApiLimits, receive_to_file
from forgeml.api._pages import Page, finish, keyset, link, pages
from forgeml.core.configfile import parse_model
from forgeml.core.errors import ForgemlError
from forgeml.core.store import Dataset, DatasetVersion
from forgeml.data import catalog
from forgeml.data.ingest import IngestOptions
from forgeml.data.pipeline import add

router = CliRouter(prefix="/api/v1/datasets")

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

_LATEST = {
    "name": Dataset.name,
    "created_at": DatasetVersion.created_at,
    "rows": DatasetVersion.rows,
    "size_bytes": DatasetVersion.size_bytes,
}
_VERSIONS = {
    "version": DatasetVersion.version,
    "created_at": DatasetVersion.created_at,
    "rows": DatasetVersion.rows,
}


@router.get("", dependencies=[require("datasets:read")])
def list_datasets(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(list(_LATEST), "name"))],
    prefix: Annotated[str | None, Query(max_length=128, description="Names starting so.")] = None,
    created_by: Annotated[str | None, Query(max_length=128)] = None,
) -> list[dict[str, Any]]:
    """Every dataset with its latest version (as `data list --json`), a page at a time."""
    home = workspace(request)
    query = catalog.latest_versions().where(Dataset.project == home.project)
    if prefix:
        query = query.where(Dataset.name.startswith(prefix, autoescape=True))
    if created_by:
        query = query.where(DatasetVersion.created_by == created_by)
    with home.store.session() as session:
        rows = session.execute(keyset(query, page, _LATEST, Dataset.name)).all()
        kept, cursor = finish(
            rows, page, lambda row: (_sort_value(row[1], row[0], page), row[0].name)
        )
        items = [catalog.version_summary(version) for _, version in kept]
    link(request, response, cursor)
    return items


def _sort_value(version: DatasetVersion, dataset: Dataset, page: Page) -> Any:
    return dataset.name if page.sort == "name" else getattr(version, page.sort)


@router.get("/{name}/versions", dependencies=[require("datasets:read", resource="dataset")])
def versions(
    request: Request,
    response: Response,
    name: str,
    page: Annotated[Page, Depends(pages(list(_VERSIONS), "version"))],
) -> list[dict[str, Any]]:
    """Every version of `name` (as `data versions --json`), oldest first unless sorted."""
    with workspace(request).store.session() as session:
        query = catalog.versions_query(session, name)
        found = session.scalars(keyset(query, page, _VERSIONS, DatasetVersion.version)).all()
        kept, cursor = finish(found, page, lambda v: (getattr(v, page.sort), v.version))
        items = [catalog.version_summary(version) for version in kept]
    link(request, response, cursor)
    return items


@router.get("/{ref}", dependencies=[require("datasets:read", resource="dataset")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A version (`NAME`, `NAME@vN`, `NAME@<digest>`) as `data show --json` prints it."""
    return catalog.describe(workspace(request), ref)


@router.post(
    "/{name}/versions",
    status_code=201,
    dependencies=[require("datasets:write", resource="dataset")],
)
async def upload(
    request: Request,
    response: Response,
    name: str,
    filename: Annotated[
        str, Query(pattern=_NAME, description="The file's name; its extension names its format.")
    ],
    file_format: Annotated[
        Literal["auto", "csv", "tsv", "jsonl", "parquet"], Query(alias="format")
    ] = "auto",
    delimiter: Annotated[str | None, Query(max_length=1)] = None,
    header: bool | None = None,
    names: Annotated[str | None, Query(max_length=4096)] = None,
    on_bad_rows: Literal["fail", "skip"] = "fail",
    label: Annotated[str | None, Query(max_length=128)] = None,
) -> dict[str, Any]:
    """Ingest the body as a new version of `name` (as `data add --json`): 201 when new, 200
    when identical content already is a version; 413 above the upload limit."""
    options = parse_model(
        IngestOptions,
        {"format": file_format, "delimiter": delimiter, "header": header,
         "on_bad_rows": on_bad_rows, "names": names},
        "query",
    )  # fmt: skip
    limits: ApiLimits = request.app.state.limits
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="forgeml-upload-"))
    try:
        path = folder / filename
        await receive_to_file(request, path, limits.max_upload_bytes, "The upload")
        recorded = await asyncio.to_thread(
            _ingest, acting(request), name, path, options, label, filename
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)
    if not recorded.created:
        response.status_code = 200
    return catalog.recorded_summary(recorded)


def _ingest(
    acting_workspace: Any,
    name: str,
    path: Path,
    options: IngestOptions,
    label: str | None,
    filename: str,
) -> catalog.Recorded:
    try:
        return add(acting_workspace, name, path, options, label, source_name=f"upload:{filename}")
    except ForgemlError as error:
        # the sentence names the upload, not this server's temporary folder
        error.args = (str(error).replace(str(path), filename),)
        raise
