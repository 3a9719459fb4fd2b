"""Pipeline run routes: the request project's runs a page at a time, and one run's steps
(`pipelines list|show`), authorized in the run's project."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request, Response
from sqlalchemy import select

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, finish, keyset, link, pages
from forgeml.core.store import PipelineRunRecord
from forgeml.pipelines import find_run, run_summary

router = CliRouter(prefix="/api/v1/pipelines")

_SORTS = {
    "created_at": PipelineRunRecord.created_at,
    "name": PipelineRunRecord.name,
    "state": PipelineRunRecord.state,
}


@router.get("/runs", dependencies=[require("pipelines:read")])
def runs(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(list(_SORTS), "created_at", descending=True))],
    name: Annotated[str | None, Query(max_length=128)] = None,
    state: Annotated[str | None, Query(max_length=16)] = None,
) -> list[dict[str, Any]]:
    """Pipeline runs without their steps (as `pipelines list --json`), newest first."""
    home = workspace(request)
    query = select(PipelineRunRecord).where(PipelineRunRecord.project == home.project)
    if name is not None:
        query = query.where(PipelineRunRecord.name == name)
    if state is not None:
        query = query.where(PipelineRunRecord.state == state.upper())
    with home.store.session() as session:
        found = session.scalars(keyset(query, page, _SORTS, PipelineRunRecord.id)).all()
        kept, cursor = finish(found, page, lambda run: (getattr(run, page.sort), run.id))
        items = [run_summary(run, steps=False) for run in kept]
    link(request, response, cursor)
    return items


@router.get("/runs/{ref}", dependencies=[require("pipelines:read", resource="pipeline")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A run (id, id prefix or pipeline name) with its steps (as `pipelines show --json`)."""
    return run_summary(find_run(workspace(request), ref))
