"""Cost routes: use and cost grouped on the server, and queue budgets (`cost report|budgets`).

A report is the request's project's (`cost:read` there); budgets are install-wide queues'
settings, read as queues are (`queues:read`, decided in `default`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.scheduler.cost import budgets_summary, cost_summary, parse_since

router = CliRouter(prefix="/api/v1/cost")


@router.get("/report", dependencies=[require("cost:read")])
def report(
    request: Request,
    by: Annotated[str, Query(pattern="^(job|queue|owner|model|key)$")] = "job",
    since: Annotated[
        str | None, Query(max_length=64, description="A duration (7d, 24h, 30m) or ISO date.")
    ] = None,
) -> dict[str, Any]:
    """Use and cost of the project's job attempts (or gateway keys), costliest first, with the
    total."""
    start = parse_since(since) if since is not None else None
    return cost_summary(workspace(request), by, start)


@router.get("/budgets", dependencies=[require("queues:read")])
def budgets(request: Request) -> dict[str, Any]:
    """Spend (every project's) against budget of every queue that has one."""
    return budgets_summary(workspace(request))
