"""Runs: the table (filtered, sorted and paged on the server, as `GET /api/v1/runs`), a run
with its metric curves (LTTB-downsampled here, drawn by uPlot) and its per-group fairness
tables, and up to 100 runs side by side, their curves in one chart a metric, each
downsampled to the chart's pixel width."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from forgeml.api import _runs
from forgeml.api._context import workspace
from forgeml.api._pages import Page, pages
from forgeml.core.errors import InvalidRequestError, NotFoundError
from forgeml.tracking.lttb import MAX_POINTS
from forgeml.ui._authz import allowed, same_as
from forgeml.ui._curves import Series, run_curves
from forgeml.ui._render import render

router = APIRouter()
READ = same_as(_runs.router, _runs.runs)
# the columns a table may show besides the name (metrics are the page's own, `m.KEY`)
COLUMNS = ["status", "started_at", "ended_at", "parent_run_id", "error"]
DEFAULT_COLUMNS = ["status", "started_at"]
MAX_COMPARED = 100
# the comparison's chart, in CSS pixels: a curve needs no more points than it has columns
COMPARE_WIDTH = 960


@router.get("/runs", dependencies=[READ])
def runs(
    request: Request,
    page: Annotated[Page, Depends(pages(list(_runs._SORTS), "started_at", descending=True))],
    name: Annotated[str | None, Query(max_length=128)] = None,
    status: Annotated[str | None, Query(pattern="^(|RUNNING|FINISHED|FAILED|KILLED)$")] = None,
    col: Annotated[list[str] | None, Query(max_length=64)] = None,
) -> HTMLResponse:
    """The runs table; htmx asks for the table alone (`HX-Request`) when a filter changes."""
    found, next_cursor = _runs.runs_page(request, page, name or None, status or None)
    metric_keys = sorted({key for run in found for key in run["metrics"]})
    chosen = col or DEFAULT_COLUMNS + [f"m.{key}" for key in metric_keys[:4]]
    unknown = [c for c in chosen if c not in COLUMNS and not c.startswith("m.")]
    if unknown:
        raise InvalidRequestError(f"query.col: no column {unknown[0]!r} (one of {COLUMNS}).")
    context: dict[str, Any] = {
        "runs": found, "columns": chosen, "all_columns": COLUMNS + [f"m.{k}" for k in metric_keys],
        "filters": {"name": name or "", "status": status or ""}, "page": page,
        "next_cursor": next_cursor,
    }  # fmt: skip
    template = "runs_table.html" if request.headers.get("HX-Request") else "runs.html"
    return render(request, template, **context)


@router.get("/runs/compare", dependencies=[READ])
def compare(request: Request, run: Annotated[list[str], Query(max_length=128)]) -> HTMLResponse:
    """Up to `MAX_COMPARED` runs side by side: their configs' differences and their curves."""
    if not 2 <= len(run) <= MAX_COMPARED:
        raise InvalidRequestError(f"Compare 2 to {MAX_COMPARED} runs: {len(run)} were chosen.")
    shown = _runs.show_many(request, run)
    by_run = _curves(request, shown, COMPARE_WIDTH)
    curves: dict[str, dict[str, tuple[list[int], np.ndarray]]] = {}
    for detail in shown:
        label = f"{detail['name']} {detail['run_id'][:8]}"
        for key, (steps, values) in by_run[detail["run_id"]].items():
            # float32's 7 digits are more than a chart's pixels resolve, in about half the
            # JSON of float64's 17 (100 runs x 960 points made a 2.5 MB page)
            curves.setdefault(key, {})[label] = (steps, np.asarray(values, dtype=np.float32))
    configs = [_flat(detail.get("config") or {}) for detail in shown]  # once a run
    keys = sorted({key for config in configs for key in config})
    columns = [[config.get(key) for config in configs] for key in keys]
    rows = [(key, values) for key, values in zip(keys, columns, strict=True) if _differ(values)]
    return render(
        request, "compare.html", runs=shown, config_rows=rows, curves=curves, width=COMPARE_WIDTH
    )


@router.get("/runs/{ref}", dependencies=[READ])
def run(request: Request, ref: str) -> HTMLResponse:
    """A run: its summary, config, dataset, and every metric's curve (at most `MAX_POINTS`
    points each)."""
    detail = _runs.show(request, ref)
    found = _curves(request, [detail], MAX_POINTS)[detail["run_id"]]
    curves = {key: {detail["name"]: series} for key, series in found.items()}
    return render(
        request, "run.html", run=detail, curves=curves, max_points=MAX_POINTS,
        fairness=run_fairness(request, detail["run_id"]),
    )  # fmt: skip


def run_fairness(request: Request, run_id: str | None) -> dict[str, Any] | None:
    """The run's per-group fairness tables as `GET /api/v1/runs/{id}/fairness` answers them;
    None for a run that keeps none, or a caller who may not read runs."""
    if run_id is None or not allowed(request, _runs.router, _runs.fairness):
        return None
    try:
        return _runs.fairness(request, run_id)
    except NotFoundError:
        return None


def _curves(
    request: Request, shown: list[dict[str, Any]], points: int
) -> dict[str, dict[str, Series]]:
    """Each shown run's curves at most `points` long, those of ended runs through the app's
    cache of them."""
    ended = {detail["run_id"] for detail in shown if detail["status"] != "RUNNING"}
    run_ids = [detail["run_id"] for detail in shown]
    return run_curves(workspace(request), run_ids, points, request.app.state.curve_cache, ended)


def _differ(values: list[Any]) -> bool:
    return len({repr(value) for value in values}) > 1


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`config` as dotted keys (`optimizer.lr`), so two runs' configs compare key by key."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat |= _flat(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat
