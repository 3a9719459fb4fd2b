"""An attempt's log as it stands (`forgeml jobs logs` without `--follow`); `_jobs` streams
it live as Server-Sent Events."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.scheduler.jobs import attempt_log

router = CliRouter(prefix="/api/v1/jobs")


@router.get(
    "/{ref}/log",
    dependencies=[require("jobs:read", resource="job")],
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def log(
    request: Request,
    ref: str,
    attempt: Annotated[int | None, Query(ge=1, description="Default: the last.")] = None,
) -> Response:
    """The attempt's log bytes (from the artifact store once it has ended); 404 for a job
    without that attempt."""
    return Response(
        attempt_log(workspace(request), ref, attempt), media_type="application/octet-stream"
    )
