"""The home page: recent runs and jobs, firing alerts, and each queue's load."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from forgeml.api import _alerts, _jobs, _queues, _runs
from forgeml.api._pages import Page
from forgeml.ui._authz import allowed, same_as
from forgeml.ui._render import render

router = APIRouter()
RECENT = 8


@router.get("/", dependencies=[same_as(_runs.router, _runs.runs)])
def home(request: Request) -> HTMLResponse:
    """What is going on: the newest runs, jobs, the alerts firing, the queues' jobs by state."""
    runs, _ = _runs.runs_page(request, Page(RECENT, "started_at", descending=True))
    jobs = alerts = None
    load: list[dict[str, Any]] | None = None
    if allowed(request, _jobs.router, _jobs.list_jobs):
        page = Page(RECENT, "submitted_at", descending=True)
        jobs = _jobs.list_jobs(request, Response(), page, state=None, queue=None, owner=None)
    if allowed(request, _alerts.router, _alerts.alerts):
        alerts = _alerts.alerts(request, state="firing")["alerts"]
    if allowed(request, _queues.router, _queues.queues):
        names = _queues.queues(request, Response(), Page(100, "name", descending=False))
        load = [_queues.show(request, queue["name"]) for queue in names]
    return render(request, "home.html", runs=runs, jobs=jobs, alerts=alerts, load=load)
