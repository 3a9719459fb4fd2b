"""Models: every registered version with its aliases, and a model's versions with its
promotion history (the audit log's `model.*` events of its versions), one version's model
card (the card route's HTML, its body embedded: the CSP forbids framing it) and its
fairness measures (the run's `fairness/<column>/<measure>` metrics, and its per-group
tables for those who may read runs)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from pydantic import PositiveInt

from forgeml.api import _audit, _models
from forgeml.api._explain import MAX_API_BACKGROUND
from forgeml.api._pages import NEXT_HEADER, Page, pages
from forgeml.core.errors import NotFoundError
from forgeml.governance._card_facts import split_metrics
from forgeml.serve.explain import DEFAULT_BACKGROUND
from forgeml.ui import _pages_explain
from forgeml.ui._authz import allowed, same_as
from forgeml.ui._pages_runs import run_fairness
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
def model(
    request: Request, name: str, version: Annotated[PositiveInt | None, Query()] = None
) -> HTMLResponse:
    """A model's versions (newest first), how its aliases moved, and the card and fairness
    of `version` (the newest by default)."""
    page = Page(HISTORY, "created_at", descending=True)
    versions = _models.models(request, Response(), page, name=name)
    _models.show(request, name)  # 404 for a model without versions
    shown = _shown(versions, name, version)
    history = None
    if allowed(request, _audit.router, _audit.events):
        events = _audit.events(
            request, Response(), Page(HISTORY, "seq", descending=True),
            actor=None, action=None, prefix=f"{name}@v",
        )  # fmt: skip
        history = [e for e in events if e["action"].startswith("model.")]
    may_explain = allowed(request, *_pages_explain.EXPLAIN)
    ref = f"{name}@v{shown['version']}"
    example = _pages_explain.example_row(request, ref) if may_explain else ""
    methods = _pages_explain.explain_methods(request, ref) if may_explain else []
    return render(
        request, "model.html", name=name, versions=versions, history=history, shown=shown,
        card=card_body(_models.card(request, name, shown["version"], "html")["card"]),
        fairness=split_metrics(shown["metrics"], "validation")[2],
        group_fairness=run_fairness(request, shown["run_id"]),
        may_explain=may_explain, example=example, methods=methods,
        background=DEFAULT_BACKGROUND, max_background=MAX_API_BACKGROUND,
    )  # fmt: skip


def _shown(versions: list[dict[str, Any]], name: str, version: int | None) -> dict[str, Any]:
    """The version the page shows the card of: `version`, or the newest."""
    if version is None:
        return versions[0]
    for record in versions:
        if record["version"] == version:
            return record
    raise NotFoundError(f"Model {name} has no version {version}.")


def card_body(document: str) -> Markup:
    """The `<body>` of the card route's HTML page (markdown-it with raw HTML off, values
    autoescaped by its template), to embed in a page; its `<style>` stays out (the CSP)."""
    start = document.index("<body>") + len("<body>")
    return Markup(document[start : document.rindex("</body>")])  # the card escaped it
