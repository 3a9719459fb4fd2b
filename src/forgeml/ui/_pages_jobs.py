"""Jobs: the list by state, a job with its live log (the API's Server-Sent Events route,
read by `EventSource` in `app.js`), and its cancel and retry buttons (changes, so each
carries the CSRF token, and is refused unless the caller holds what the API route needs)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse

from forgeml.api import _jobs
from forgeml.api._pages import NEXT_HEADER, Page, pages
from forgeml.scheduler.model import JobState
from forgeml.ui._authz import allowed, same_as
from forgeml.ui._render import render
from forgeml.ui._security import csrf_checked

router = APIRouter()
READ = same_as(_jobs.router, _jobs.list_jobs)
CSRF = Depends(csrf_checked)


@router.get("/jobs", dependencies=[READ])
def jobs(
    request: Request,
    page: Annotated[Page, Depends(pages(list(_jobs._SORTS), "submitted_at", descending=True))],
    state: Annotated[str | None, Query(max_length=32)] = None,
    queue: Annotated[str | None, Query(max_length=128)] = None,
) -> HTMLResponse:
    """Jobs, newest first, by state and queue, a page at a time."""
    answer = Response()
    states = [state] if state else None
    found = _jobs.list_jobs(request, answer, page, state=states, queue=queue or None, owner=None)
    return render(
        request, "jobs.html", jobs=found, states=list(JobState.__members__),
        filters={"state": state or "", "queue": queue or ""},
        page=page, next_cursor=answer.headers.get(NEXT_HEADER),
    )  # fmt: skip


@router.get("/jobs/{ref}", dependencies=[READ])
def job(request: Request, ref: str) -> HTMLResponse:
    """A job: its spec, attempts, state with the buttons its viewer may press, and its log."""
    detail = _jobs.show(request, ref)
    return render(request, "job.html", job=detail, **_actions(request, detail))


@router.post("/jobs/{ref}/cancel", dependencies=[CSRF, same_as(_jobs.router, _jobs.cancel_job)])
def cancel(request: Request, ref: str) -> HTMLResponse:
    """Cancel the job as `POST /api/v1/jobs/{ref}/cancel` does; answers its new state."""
    detail = _jobs.cancel_job(request, ref)
    return render(request, "job_state.html", job=detail, **_actions(request, detail))


@router.post("/jobs/{ref}/retry", dependencies=[CSRF, same_as(_jobs.router, _jobs.retry_job)])
def retry(request: Request, ref: str) -> HTMLResponse:
    """Queue a failed or cancelled job again, as `POST /api/v1/jobs/{ref}/retry` does."""
    detail = _jobs.retry_job(request, ref)
    return render(request, "job_state.html", job=detail, **_actions(request, detail))


def _actions(request: Request, detail: dict[str, Any]) -> dict[str, bool]:
    """Which buttons the job shows: those its state allows and the caller may press."""
    final = JobState(detail["state"]).is_final
    return {
        "can_cancel": not final
        and not detail["cancel_requested"]
        and allowed(request, _jobs.router, _jobs.cancel_job),
        "can_retry": detail["state"] in ("FAILED", "CANCELLED")
        and allowed(request, _jobs.router, _jobs.retry_job),
    }
