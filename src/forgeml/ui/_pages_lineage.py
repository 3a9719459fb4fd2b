"""Lineage: the graph `forgeml lineage REF` prints, drawn by the governance module's SVG
(an <img> of the API route's `?format=svg`: CSP-safe, nothing inline) with its nodes and
edges as tables. The page asks what the API route asks: the read of the kind of record the
reference names (the route's own dependency, not a copy)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from forgeml.api import _lineage
from forgeml.ui._authz import same_as
from forgeml.ui._render import render

router = APIRouter()
# the route's own check: `datasets:read` for a dataset, `models:read` for a model...
READ_OF_ITS_KIND = Depends(_lineage._read_of_its_kind)


@router.get("/lineage", dependencies=[same_as(_lineage.router, _lineage.show_lineage)])
def lineage_form(
    request: Request,
    record: Annotated[str | None, Query(max_length=256)] = None,
) -> Response:
    """A form asking for a reference; a submitted one goes to its lineage page."""
    if record:
        return RedirectResponse(f"/lineage/{quote(record.strip(), safe='@:')}", status_code=303)
    return render(request, "lineage_form.html")


@router.get("/lineage/{record}", dependencies=[READ_OF_ITS_KIND])
def lineage(request: Request, record: _lineage.RecordPath) -> HTMLResponse:
    """The lineage around `record`: the drawing, then its nodes and edges."""
    found = _lineage.show_lineage(request, record, None, "both", "json")
    return render(request, "lineage.html", record=record, lineage=found)
