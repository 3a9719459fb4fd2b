"""Datasets: the list with each latest version, a version (schema, quality profile, its
first rows, the dataset's versions) and the diff of two versions."""

from __future__ import annotations

import io
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse

from forgeml.api import _dataset_ops, _datasets
from forgeml.api._context import workspace
from forgeml.api._pages import NEXT_HEADER, Page, pages
from forgeml.core.errors import OtherProjectError
from forgeml.data import catalog
from forgeml.ui._authz import same_as
from forgeml.ui._render import render

router = APIRouter()
READ = same_as(_datasets.router, _datasets.list_datasets)
PREVIEW_ROWS = 20
MAX_VERSIONS = 100


@router.get("/datasets", dependencies=[READ])
def datasets(
    request: Request,
    page: Annotated[Page, Depends(pages(list(_datasets._LATEST), "name"))],
    prefix: Annotated[str | None, Query(max_length=128)] = None,
) -> HTMLResponse:
    """Every dataset with its latest version, a page at a time."""
    answer = Response()
    found = _datasets.list_datasets(request, answer, page, prefix=prefix or None, created_by=None)
    return render(
        request, "datasets.html", datasets=found, prefix=prefix or "", page=page,
        next_cursor=answer.headers.get(NEXT_HEADER),
    )  # fmt: skip


@router.get("/datasets/{ref}/diff", dependencies=[same_as(_dataset_ops.router, _dataset_ops.diff)])
def diff(request: Request, ref: str, to: Annotated[str, Query(max_length=256)]) -> HTMLResponse:
    """What changed from version `ref` to version `to`: schema, rows, column statistics."""
    return render(request, "dataset_diff.html", diff=_dataset_ops.diff(request, ref, to))


@router.get("/datasets/{ref}", dependencies=[same_as(_datasets.router, _datasets.show)])
def dataset(request: Request, ref: str) -> HTMLResponse:
    """A version (`NAME` for the latest): schema, profile, its first rows, every version."""
    detail = _datasets.show(request, ref)
    versions = _datasets.versions(
        request, Response(), detail["dataset"], Page(MAX_VERSIONS, "version", descending=True)
    )
    return render(
        request, "dataset.html", version=detail, versions=versions,
        preview=_preview(request, detail["ref"]), charts=_histograms(detail["profile"]),
    )  # fmt: skip


def _preview(request: Request, ref: str) -> dict[str, Any]:
    """The version's first rows, read through the API's frame route (an Arrow stream).

    The page is authorized in the dataset's project, but its rows are read in the project
    the switch chose: for a dataset of another, `elsewhere` names its project instead (the
    rest of the page still shows).
    """
    import polars as pl

    try:
        answer = _dataset_ops.frame(request, ref, limit=PREVIEW_ROWS)
    except OtherProjectError:
        with workspace(request).store.read_session() as session:
            project = catalog.resolve(session, ref).dataset.project
        return {"columns": [], "rows": [], "elsewhere": project}
    rows = pl.read_ipc_stream(io.BytesIO(bytes(answer.body)))
    return {"columns": rows.columns, "rows": [[str(v) for v in row] for row in rows.iter_rows()]}


def _histograms(profile: dict[str, Any]) -> dict[str, Any]:
    """Each numeric column's histogram, for ECharts: bin labels and counts."""
    charts = {}
    for column, stats in profile.get("column_stats", {}).items():
        histogram = stats.get("histogram")
        if histogram:
            edges = histogram["edges"]
            labels = [f"{edges[i]:.4g}-{edges[i + 1]:.4g}" for i in range(len(edges) - 1)]
            charts[column] = {"labels": labels, "counts": histogram["counts"]}
    return charts
