"""Run routes: list, show and metric curves, answering what `forgeml runs ... --json` print,
and a run's per-group fairness tables."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request
from sqlalchemy import select
from sqlalchemy.orm import lazyload, load_only

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliJSONResponse, CliRouter
from forgeml.api._pages import Page, finish, keyset, link, pages
from forgeml.core.errors import NotFoundError
from forgeml.core.store import RunRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking import get_run, reap_expired, run_detail, run_summary
from forgeml.tracking.history import metric_history

router = CliRouter(prefix="/api/v1/runs")

_SUMMARY = (
    RunRecord.name, RunRecord.status, RunRecord.started_at, RunRecord.ended_at,
    RunRecord.parent_run_id, RunRecord.metrics, RunRecord.error,
)  # fmt: skip
_SORTS = {"started_at": RunRecord.started_at, "name": RunRecord.name, "status": RunRecord.status}


@router.get("", dependencies=[require("runs:read")])
def runs(
    request: Request,
    page: Annotated[Page, Depends(pages(list(_SORTS), "started_at", descending=True))],
    name: Annotated[str | None, Query(max_length=128)] = None,
    status: Annotated[str | None, Query(pattern="^(RUNNING|FINISHED|FAILED|KILLED)$")] = None,
    parent_run_id: Annotated[str | None, Query(max_length=32)] = None,
) -> CliJSONResponse:
    """Runs (as `runs list --json`), newest first unless sorted; dead runs marked KILLED first."""
    items, cursor = runs_page(request, page, name, status, parent_run_id)
    # a Response skips FastAPI's `jsonable_encoder` pass over the plain data, which took
    # most of a page's time (100 runs x 50 metrics walked value by value); orjson writes
    # the same JSON from it directly
    answer = CliJSONResponse(items)
    link(request, answer, cursor)
    return answer


def runs_page(
    request: Request,
    page: Page,
    name: str | None = None,
    status: str | None = None,
    parent_run_id: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of run summaries and the cursor of the next (None on the last): what the
    list route answers, for the web UI's tables too."""
    home = workspace(request)
    _reap_due(request, home)
    # a summary shows neither the config (50+ params) nor the dataset: only its columns read
    query = (
        select(RunRecord)
        .options(lazyload(RunRecord.dataset_version), load_only(*_SUMMARY))
        .where(RunRecord.project == home.project)
    )
    for column, wanted in (
        (RunRecord.name, name), (RunRecord.status, status),
        (RunRecord.parent_run_id, parent_run_id),
    ):  # fmt: skip
        if wanted is not None:
            query = query.where(column == wanted)
    with home.store.session() as session:
        found = session.scalars(keyset(query, page, _SORTS, RunRecord.id)).all()
        kept, cursor = finish(found, page, lambda run: (getattr(run, page.sort), run.id))
        return [run_summary(run) for run in kept], cursor


@router.get("/{ref}", dependencies=[require("runs:read", resource="run")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A run (id, id prefix or name) as `runs show --json` prints it."""
    home = workspace(request)
    _reap_due(request, home)
    return run_detail(get_run(home, ref))


def show_many(request: Request, refs: list[str]) -> list[dict[str, Any]]:
    """`show` of each of `refs`, in order, among the request project's runs: those that are
    run ids read in one query (the web UI's comparison of up to 100 runs), any other
    reference as `show` finds it."""
    home = workspace(request)
    _reap_due(request, home)
    with home.store.session() as session:
        found = session.scalars(
            select(RunRecord).where(RunRecord.id.in_(set(refs)), RunRecord.project == home.project)
        )
        by_id = {record.id: run_detail(record) for record in found}
    return [by_id[ref] if ref in by_id else _shown_here(home, ref) for ref in refs]


def _shown_here(home: Workspace, ref: str) -> dict[str, Any]:
    record = get_run(home, ref)
    if record.project != home.project:  # the page is authorized in the request's project
        raise NotFoundError(f"No run '{ref}' in the project {home.project!r}.")
    return run_detail(record)


@router.get("/{ref}/metrics", dependencies=[require("runs:read", resource="run")])
def metrics(
    request: Request,
    ref: str,
    key: Annotated[list[str] | None, Query(description="Only these metrics.")] = None,
) -> dict[str, Any]:
    """Every logged value of the run's metrics (or of `key`s), as [step, value] by step."""
    home = workspace(request)
    record = get_run(home, ref)
    curves = metric_history(home, record.id, key)
    return {
        "run_id": record.id,
        "metrics": {name: [list(p) for p in c] for name, c in curves.items()},
    }


@router.get("/{ref}/fairness", dependencies=[require("runs:read", resource="run")])
def fairness(request: Request, ref: str) -> dict[str, Any]:
    """The run's per-group fairness tables (fairlearn's MetricFrame per split and sensitive
    column: count, accuracy, TPR, FPR, selection rate; demographic-parity and equalised-odds
    difference and ratio); 404 for a run that keeps none (no `data.slices`)."""
    from forgeml.governance.fairness_report import run_fairness

    return run_fairness(workspace(request), ref)


def _reap_due(request: Request, home: Workspace) -> None:
    # a write (its own session): on the app's cadence, not on every read
    if request.app.state.reap_every.due():
        reap_expired(home)
