"""What the CLI's remote mode writes onto the client: `models export` (an edge bundle built
here, answered as a tar the client unpacks) and `jobs export` (a Volcano manifest as text).

The bundle is built in a private temporary folder, removed before the first byte is sent.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

import orjson
from fastapi import Query, Request
from fastapi.responses import StreamingResponse
from pydantic import PositiveInt

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.core.archives import SUMMARY_HEADER, TAR_MEDIA_TYPE, pack_folder

router = CliRouter(prefix="/api/v1")
CHUNK_BYTES = 1 << 20


@router.get(
    "/models/{name}/versions/{version}/export",
    dependencies=[require("models:read", resource="model")],
    response_class=StreamingResponse,
    responses={200: {"content": {TAR_MEDIA_TYPE: {}}}},
)
def export_model(
    request: Request,
    name: str,
    version: PositiveInt,
    target: Annotated[Literal["edge"], Query(description="What to export for.")] = "edge",
    precision: Annotated[
        Literal["auto", "fp32", "int8"],
        Query(description="auto: int8 only where it agrees with fp32 on held-out rows."),
    ] = "auto",
) -> StreamingResponse:
    """The version as `forgeml models export` writes it (the edge bundle, its manifest.json
    and its model card as README.md, naming only records the caller may read), as one tar
    of the folder's files; the header `X-Forgeml-Summary` holds what `models export --json`
    prints (`folder` the server's)."""
    from forgeml.api._lineage import may_read
    from forgeml.core.atomic import atomic_write_text
    from forgeml.governance.cards import model_card
    from forgeml.optimize.edge import export_edge

    home = workspace(request)
    scratch = Path(tempfile.mkdtemp(prefix="forgeml-export-"))
    try:
        bundle = export_edge(home, f"{name}@v{version}", scratch / "bundle", precision)
        card = model_card(home, bundle.source, may_read=may_read(request))
        atomic_write_text(bundle.folder / "README.md", card)
        pack_folder(bundle.folder, scratch / "bundle.tar")
        summary = orjson.dumps(bundle.as_dict() | {"card": "README.md"}).decode()
        size = (scratch / "bundle.tar").stat().st_size
        handle = (scratch / "bundle.tar").open("rb")
    finally:
        # the open handle still reads the tar (POSIX): nothing stays behind, whether the
        # answer is sent, the caller goes away, or the build failed
        shutil.rmtree(scratch, ignore_errors=True)
    return StreamingResponse(
        _chunks(handle),
        media_type=TAR_MEDIA_TYPE,
        headers={SUMMARY_HEADER: summary, "Content-Length": str(size)},
    )


def _chunks(handle: BinaryIO) -> Iterator[bytes]:
    with handle:
        while chunk := handle.read(CHUNK_BYTES):
            yield chunk


@router.get("/jobs/{ref}/export", dependencies=[require("jobs:read", resource="job")])
def export_job(
    request: Request,
    ref: str,
    export_format: Annotated[
        Literal["volcano"], Query(alias="format", description="Only 'volcano' for now.")
    ] = "volcano",
    image: Annotated[
        str, Query(max_length=512, description="Container image with forgeml installed.")
    ] = "forgeml:latest",
    namespace: Annotated[
        str, Query(max_length=253, description="Kubernetes namespace.")
    ] = "default",
) -> dict[str, Any]:
    """The job's Volcano manifest (its PriorityClass, Queue and Job) as `forgeml jobs export`
    writes it: `{"format", "manifest"}`, the manifest as YAML text."""
    from forgeml.scheduler.export import volcano_export

    text = volcano_export(workspace(request), ref, image, namespace)
    return {"format": export_format, "manifest": text}
