"""Job routes: submit, list, show, cancel, retry, and logs as Server-Sent Events.

A submission is queued for the server's scheduler (as `jobs submit --detach`), owned and
audited as the caller; answers are what `forgeml jobs ... --json` print. `GET .../logs`
follows the job as `jobs logs -f` does: every attempt's log from its start, as `log`
events, then one `end` event naming the state it ended in. Each caller may follow at most
`ApiLimits.max_log_streams` logs at once (429 above).
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import orjson
from fastapi import Depends, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt
from starlette.types import Receive, Scope, Send

from forgeml.api._authz import Principal, require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._limits import StreamSlots
from forgeml.api._pages import Page, finish, keyset, link, pages
from forgeml.core.errors import InvalidRequestError
from forgeml.core.store import JobRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler.foreground import POLL_SECONDS, LogCursor
from forgeml.scheduler.jobs import (
    cancel,
    find_job,
    job_detail,
    job_summary,
    jobs_query,
    retry,
)
from forgeml.scheduler.model import JobSpec, JobState, ResourceRequest
from forgeml.scheduler.submit import submit_and_run

router = CliRouter(prefix="/api/v1/jobs")

_SORTS = {
    "submitted_at": JobRecord.submitted_at,
    "updated_at": JobRecord.updated_at,
    "name": JobRecord.name,
    "state": JobRecord.state,
    "priority": JobRecord.priority,
}


def _described(name: str) -> str | None:
    return JobSpec.model_fields[name].description


class JobSubmission(BaseModel):
    """`POST /api/v1/jobs`: a command job, as `forgeml jobs submit` takes it (`JobSpec`)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1, description=_described("command"))
    name: str | None = Field(None, max_length=128, description=_described("name"))
    resources: ResourceRequest = Field(default_factory=ResourceRequest)
    workers: PositiveInt = Field(1, description=_described("workers"))
    queue: str = Field("default", max_length=128, description=_described("queue"))
    priority: str = Field("normal", description=_described("priority"))
    max_retries: NonNegativeInt = Field(0, description=_described("max_retries"))
    backoff_seconds: NonNegativeFloat = Field(5.0, description=_described("backoff_seconds"))
    timeout_seconds: NonNegativeFloat | None = Field(
        None, description=_described("timeout_seconds")
    )
    env: dict[str, str] = Field(default_factory=dict, description=_described("env"))


@router.post("", status_code=201, dependencies=[require("jobs:submit")])
def submit(request: Request, body: JobSubmission) -> dict[str, Any]:
    """Queue a command job for the scheduler (as `jobs submit --detach --json`)."""
    fields = body.model_dump()
    fields["name"] = body.name or body.command[0].rsplit("/", 1)[-1]
    job = submit_and_run(acting(request), fields, detach=True, wait=False)
    return job_summary(job)


@router.get("", dependencies=[require("jobs:read")])
def list_jobs(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(list(_SORTS), "submitted_at", descending=True))],
    state: Annotated[list[str] | None, Query(description="Only jobs in these states.")] = None,
    queue: Annotated[str | None, Query(max_length=128)] = None,
    owner: Annotated[str | None, Query(max_length=128)] = None,
) -> list[dict[str, Any]]:
    """Jobs (as `jobs list --json`), newest first unless sorted, a page at a time."""
    states = [value.upper() for value in state or []]
    unknown = [value for value in states if value not in JobState.__members__]
    if unknown:
        known = ", ".join(JobState.__members__)
        raise InvalidRequestError(f"query.state: unknown state '{unknown[0]}' (one of {known}).")
    home = workspace(request)
    query = jobs_query(states, queue, home.project)
    if owner:
        query = query.where(JobRecord.owner == owner)
    with home.store.session() as session:
        found = session.scalars(keyset(query, page, _SORTS, JobRecord.id)).all()
        kept, cursor = finish(found, page, lambda job: (getattr(job, page.sort), job.id))
        items = [job_summary(job) for job in kept]
    link(request, response, cursor)
    return items


@router.get("/{ref}", dependencies=[require("jobs:read", resource="job")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A job (id, id prefix or name) as `jobs show --json` prints it."""
    return job_detail(workspace(request), ref)


@router.post("/{ref}/cancel", dependencies=[require("jobs:cancel", resource="job")])
def cancel_job(request: Request, ref: str) -> dict[str, Any]:
    """Cancel a job: at once when it waits, by the scheduler when it runs (409: it ended)."""
    return job_summary(cancel(acting(request), ref))


@router.post("/{ref}/retry", dependencies=[require("jobs:submit", resource="job")])
def retry_job(request: Request, ref: str) -> dict[str, Any]:
    """Queue a FAILED or CANCELLED job again (409 otherwise)."""
    return job_summary(retry(acting(request), ref))


@router.get(
    "/{ref}/logs",
    dependencies=[require("jobs:read", resource="job")],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
def logs(request: Request, ref: str) -> StreamingResponse:
    """Follow the job's log as Server-Sent Events until it ends (`log`, then `end`)."""
    home = workspace(request)
    job = find_job(home, ref)
    principal: Principal = request.state.principal
    slots: StreamSlots = request.app.state.log_streams
    slots.take(principal.actor)
    return _HeldStream(
        _follow(home, job.id),
        release=lambda: slots.give(principal.actor),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class _HeldStream(StreamingResponse):
    """A stream that gives its caller's slot back however it ends (done, failed, or the
    client gone: Starlette then cancels the send, before the body's `finally` could run)."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None], **kw: Any):
        super().__init__(content, **kw)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def _follow(home: Workspace, job_id: str) -> AsyncIterator[bytes]:
    cursor = LogCursor()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    yield f": job {job_id}\n\n".encode()  # sent at once: the stream is open
    while True:
        job = await asyncio.to_thread(find_job, home, job_id)
        chunks: list[bytes] = []
        await asyncio.to_thread(cursor.pump, home, job, chunks.append)
        text = "".join(decoder.decode(chunk) for chunk in chunks)
        if text:
            yield event("log", text)
        if JobState(job.state).is_final:
            tail = decoder.decode(b"", final=True)
            if tail:
                yield event("log", tail)
            ended = {"job_id": job.id, "state": job.state, "attempts": job.attempts}
            yield event("end", orjson.dumps(ended).decode())
            return
        await asyncio.sleep(POLL_SECONDS)


def event(name: str, data: str) -> bytes:
    """One Server-Sent Event (every line of `data` its own `data:` field, as the spec says)."""
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return (f"event: {name}\n" + "".join(f"data: {line}\n" for line in lines) + "\n").encode()
