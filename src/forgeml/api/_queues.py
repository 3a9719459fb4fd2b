"""Queue routes: list, show, create, answering what `forgeml queues ... --json` print.

Queues are shared by every project: a list or show is decided in the request's project
(`queues:read`, `_projects.SHARED_READS`), so a team's member sees them all; a create is
decided in `default` (`queues:manage`, install maintainers)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveInt

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.scheduler.model import QueueSpec
from forgeml.scheduler.queues import (
    create_queue,
    list_queues,
    parse_queue,
    queue_detail,
    queue_summary,
)

router = CliRouter(prefix="/api/v1/queues")


def _described(name: str) -> str | None:
    return QueueSpec.model_fields[name].description


class NewQueue(BaseModel):
    """`POST /api/v1/queues`: a queue as `forgeml queues create` takes it (`QueueSpec`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=128, description="Queue name.")
    weight: PositiveInt = Field(1, description=_described("weight"))
    # only the capped dimensions: a cap on GPUs alone leaves CPUs and memory free
    capability: dict[Literal["cpus", "gpus", "memory_gb"], NonNegativeFloat] | None = Field(
        None, description=_described("capability")
    )
    reclaimable: bool = Field(True, description=_described("reclaimable"))
    budget: NonNegativeFloat | None = Field(None, description=_described("budget"))


@router.get("", dependencies=[require("queues:read")])
def queues(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "weight", "created_at"], "name"))],
) -> list[dict[str, Any]]:
    """Every queue (as `queues list --json`), a page at a time."""
    items = [queue_summary(record) for record in list_queues(workspace(request))]
    kept, cursor = in_memory(items, page, lambda item, sort: (item[sort], item["name"]))
    link(request, response, cursor)
    return kept


@router.get("/{name}", dependencies=[require("queues:read")])
def show(request: Request, name: str) -> dict[str, Any]:
    """A queue and its jobs counted by state, every project's (as `queues show --json`)."""
    return queue_detail(workspace(request), name)


@router.post("", status_code=201, dependencies=[require("queues:manage")])
def create(request: Request, body: NewQueue) -> dict[str, Any]:
    """Create a queue (409 when the name is taken), audited as the caller."""
    spec = parse_queue(body.model_dump(exclude_none=True))
    return queue_summary(create_queue(acting(request), spec))
