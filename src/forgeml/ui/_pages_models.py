"""Models: every registered version with its aliases, and a model's versions with its
promotion history (the audit log's `model.*` events of its versions)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import HTMLResponse

from forgeml.api import _audit, _models
from forgeml.api._pages import NEXT_HEADER, Page, pages
from forgeml.ui._authz import allowed, same_as
from forgeml.ui._render import render

router = APIRouter()
READ = same_as(_models.router, _models.models)
HISTORY = 200


@router.get("/models", dependencies=[READ])
def models(
    request: Request,
    page: Annotated[Page, Depends(pages(["name", "created_at"], "name"))],
) -> HTMLResponse:
    """Registered versions, by name then version, a page at a time."""
    answer = Response()
    found = _models.models(request, answer, page, name=None)
    return render(
        request, "models.html", versions=found, page=page,
        next_cursor=answer.headers.get(NEXT_HEADER),
    )  # fmt: skip


@router.get("/models/{name}", dependencies=[READ])
def model(request: Request, name: str) -> HTMLResponse:
    """A model's versions (newest first) and how its aliases moved."""
    page = Page(HISTORY, "created_at", descending=True)
    versions = _models.models(request, Response(), page, name=name)
    _models.show(request, name)  # 404 for a model without versions
    history = None
    if allowed(request, _audit.router, _audit.events):
        events = _audit.events(
            request, Response(), Page(HISTORY, "seq", descending=True),
            actor=None, action=None, prefix=f"{name}@v",
        )  # fmt: skip
        history = [e for e in events if e["action"].startswith("model.")]
    return render(request, "model.html", name=name, versions=versions, history=history)
