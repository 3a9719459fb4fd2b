"""Labelling routes: tasks, the next item for the caller, submissions, imports, agreement
and export, answering what `forgeml label ... --json` print.

The caller is the annotator (`labels:submit`); creating a task, adjudicating, importing
and exporting need `labels:manage`. Every write is audited as the caller. A list shows the
request's project's tasks and a create lands there; an item route is authorized in its
task's project (`resource="label"`), and what serves, labels, imports into, reorders or
exports a task must act in it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from forgeml.api._authz import Principal, require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.label import (
    FORMATS,
    Reorder,
    TaskSpec,
    create_task,
    describe_task,
    export_task,
    import_labels,
    list_tasks,
    next_item,
    reorder_task,
    submit,
    task_agreement,
    task_summary,
)
from forgeml.label.imports import parse_labels

router = CliRouter(prefix="/api/v1/labels")
_MAX_IMPORT = 8 * 1024 * 1024  # characters of an import's content


class Submission(BaseModel):
    """`POST /api/v1/labels/{name}/submit` (and `/adjudicate`): one item's label."""

    model_config = ConfigDict(extra="forbid")

    item: int = Field(ge=0, le=2**31 - 1, description="The item's number (from /next).")
    label: str | list[dict[str, Any]] = Field(
        description="A class, or a list of spans ({start, end, label}) or boxes "
        "({x, y, width, height, label})."
    )


class LabelImport(BaseModel):
    """`POST /api/v1/labels/{name}/import`: a file's content, as `label import` reads it."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["csv", "jsonl", "label-studio"] = Field(description=", ".join(FORMATS))
    content: str = Field(max_length=_MAX_IMPORT, description="The file's text.")
    key: str = Field("item", max_length=128, description="What names an item.")
    annotator: str | None = Field(None, max_length=128, description="For rows naming nobody.")


class LabelExport(BaseModel):
    """`POST /api/v1/labels/{name}/export`: where and how the settled labels are recorded."""

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = Field(None, max_length=128, description="Dataset to record into.")
    column: str = Field("label", min_length=1, max_length=128, description="Label column.")
    resolve: Literal["adjudicated", "majority"] = Field("adjudicated")


def _caller(request: Request) -> str:
    principal: Principal = request.state.principal
    return principal.actor


@router.get("", dependencies=[require("labels:read")])
def tasks(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "created_at"], "name"))],
) -> list[dict[str, Any]]:
    """Every labelling task (as `label list --json`), a page at a time."""
    items = list_tasks(workspace(request))
    kept, cursor = in_memory(items, page, lambda item, sort: (item[sort], item["name"]))
    link(request, response, cursor)
    return kept


@router.post("", status_code=201, dependencies=[require("labels:manage")])
def create(request: Request, body: TaskSpec) -> dict[str, Any]:
    """Create a labelling task (409 when the name is taken)."""
    return task_summary(create_task(acting(request), body))


@router.get("/{name}", dependencies=[require("labels:read", resource="label")])
def show(request: Request, name: str) -> dict[str, Any]:
    """A task and its progress (as `label show --json`)."""
    return describe_task(workspace(request), name)


@router.post("/{name}/reorder", dependencies=[require("labels:manage", resource="label")])
def reorder(request: Request, name: str, body: Reorder) -> dict[str, Any]:
    """Rank the task's items again (the next round of active learning)."""
    return task_summary(reorder_task(acting(request), name, body))


@router.post("/{name}/next", dependencies=[require("labels:submit", resource="label")])
def next_for_caller(request: Request, name: str) -> dict[str, Any] | None:
    """Lease the caller the next item (null when nothing is left for them)."""
    return next_item(acting(request), name, _caller(request))


@router.post("/{name}/submit", dependencies=[require("labels:submit", resource="label")])
def submit_label(request: Request, name: str, body: Submission) -> dict[str, Any]:
    """The caller's label for an item (409 when it is leased to someone else)."""
    return submit(acting(request), name, body.item, _caller(request), body.label)


@router.post("/{name}/adjudicate", dependencies=[require("labels:manage", resource="label")])
def adjudicate(request: Request, name: str, body: Submission) -> dict[str, Any]:
    """Settle an item with the caller's label, whatever its annotators gave."""
    return submit(acting(request), name, body.item, _caller(request), body.label, adjudicate=True)


@router.post("/{name}/import", dependencies=[require("labels:manage", resource="label")])
def import_(request: Request, name: str, body: LabelImport) -> dict[str, Any]:
    """Import labels made elsewhere: all are stored, or none (422 names the bad row)."""
    labels = parse_labels(body.content, "the content", body.format, body.annotator, body.key)
    return import_labels(acting(request), name, labels, body.key)


@router.get("/{name}/agreement", dependencies=[require("labels:read", resource="label")])
def agreement(request: Request, name: str) -> dict[str, Any]:
    """Cohen's kappa per pair of annotators and Fleiss' kappa (as `label agreement`)."""
    return task_agreement(workspace(request), name)


@router.post(
    "/{name}/export", status_code=201, dependencies=[require("labels:manage", resource="label")]
)
def export(request: Request, name: str, body: LabelExport) -> dict[str, Any]:
    """Record the settled labels as a new dataset version whose lineage names the task."""
    return export_task(
        acting(request), name, dataset=body.dataset, column=body.column, resolve=body.resolve
    )
