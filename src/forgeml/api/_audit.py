"""Audit routes: the hash-chained log a page at a time, and a check of the whole chain."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request, Response
from sqlalchemy import select

from forgeml.api._authz import require
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, finish, keyset, link, pages
from forgeml.core import audit
from forgeml.core.store import AuditEvent

router = CliRouter(prefix="/api/v1/audit")

_SORTS = {"seq": AuditEvent.seq}


@router.get("", dependencies=[require("audit:read")])
def events(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(list(_SORTS), "seq"))],
    actor: Annotated[str | None, Query(max_length=128)] = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    prefix: Annotated[
        str | None, Query(max_length=256, description="Objects starting so (e.g. job:).")
    ] = None,
) -> list[dict[str, Any]]:
    """Audit events (as `audit log --json`), in chain order unless `order=desc`."""
    query = select(AuditEvent)
    if actor is not None:
        query = query.where(AuditEvent.actor == actor)
    if action is not None:
        query = query.where(AuditEvent.action == action)
    if prefix:
        query = query.where(AuditEvent.object_ref.startswith(prefix, autoescape=True))
    with workspace(request).store.session() as session:
        found = session.scalars(keyset(query, page, _SORTS, AuditEvent.seq)).all()
        kept, cursor = finish(found, page, lambda event: (event.seq, event.seq))
        items = [audit.event_summary(event) for event in kept]
    link(request, response, cursor)
    return items


@router.get("/verify", dependencies=[require("audit:read")])
def verify(request: Request) -> dict[str, Any]:
    """Check the whole chain against its signed checkpoint (as `forgeml audit verify` does):
    its length and head hash, or 409 with the sentence naming the broken or missing events."""
    result = workspace(request).verify_audit()
    return {"intact": True, "events": result.events, "head": result.head}
