"""Model routes: registered versions (list, show), promotion to an alias, model cards.

Answers are what `forgeml models list|show|promote|card --json` print. A promotion goes
through the same metric gate as `models promote` (409 when the candidate does not win, or
breaks its fairness bounds `max_dp_diff` / `max_eo_diff`, unless `force`), and is audited as
the caller. A version's training `dataset` or `parent` of a project the caller may not read
is answered as "in another project" (lineage's check), as its card names it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.api._pages import Page, in_memory, link, pages
from forgeml.core.store import ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking import (
    FairnessBounds,
    get_model_version,
    list_models,
    model_aliases,
    promote,
    promotion_summary,
    version_summary,
)

router = CliRouter(prefix="/api/v1/models")


class Promote(BaseModel):
    """`POST /api/v1/models/{name}/promote`: as `forgeml models promote` takes it."""

    model_config = ConfigDict(extra="forbid")

    version: PositiveInt = Field(description="The version to promote.")
    alias: str = Field("production", max_length=64, description="The alias to point at it.")
    metric: str = Field("accuracy", max_length=128, description="The gating metric.")
    mode: Literal["max", "min"] = Field("max", description="max: higher is better; min: lower.")
    force: bool = Field(False, description="Promote even if it does not win (audited).")
    max_dp_diff: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Reject a version whose demographic parity difference across any "
        "sensitive column is above this.",
    )
    max_eo_diff: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Reject a version whose equalized odds difference across any sensitive "
        "column is above this.",
    )


class Mitigate(BaseModel):
    """`POST /api/v1/models/{ref}/mitigate`: as `forgeml models mitigate` takes it."""

    model_config = ConfigDict(extra="forbid")

    sensitive: str = Field(max_length=255, description="The sensitive column.")
    constraint: Literal["demographic_parity", "equalized_odds"] = "demographic_parity"
    objective: Literal["accuracy_score", "balanced_accuracy_score"] = "accuracy_score"
    fit_split: Literal["train", "validation"] = Field(
        "validation", description="The split the thresholds are fitted on."
    )


def _position(record: ModelVersionRecord, sort: str) -> tuple[Any, Any]:
    if sort == "name":
        return record.name, record.version
    return record.created_at, record.id


@router.get("", dependencies=[require("models:read")])
def models(
    request: Request,
    response: Response,
    page: Annotated[Page, Depends(pages(["name", "created_at"], "name"))],
    name: Annotated[str | None, Query(max_length=128, description="Only this model.")] = None,
) -> list[dict[str, Any]]:
    """Registered versions with their aliases (as `models list --json`), a page at a time."""
    home = workspace(request)
    found = list_models(home, name, project=home.project)
    kept, cursor = in_memory(found, page, _position)
    aliases = {model: model_aliases(home, model) for model in {r.name for r in kept}}
    link(request, response, cursor)
    return _readable(request, home, kept, aliases)


@router.get("/{ref}", dependencies=[require("models:read", resource="model")])
def show(request: Request, ref: str) -> dict[str, Any]:
    """A version (`NAME`, `NAME@vN`, `NAME@ALIAS`) as `models show --json` prints it."""
    home = workspace(request)
    record = get_model_version(home, ref)
    return _readable(request, home, [record], {record.name: model_aliases(home, record.name)})[0]


def _readable(
    request: Request,
    home: Workspace,
    records: list[ModelVersionRecord],
    aliases: dict[str, dict[str, int]],
) -> list[dict[str, Any]]:
    """The versions' summaries, a training dataset version or a parent model of a project
    the caller may not read named `HIDDEN_LABEL` instead."""
    from sqlalchemy import select

    from forgeml.api._lineage import may_read
    from forgeml.governance.lineage_refs import HIDDEN_LABEL

    decide = may_read(request)
    names = {r.parent.partition("@")[0] for r in records if r.parent and ":" not in r.parent}
    parents: dict[str, str] = {}
    if names:  # most versions have no parent: no query
        query = select(ModelVersionRecord.name, ModelVersionRecord.project).distinct()
        with home.store.read_session() as session:
            rows = session.execute(query.where(ModelVersionRecord.name.in_(names))).all()
        parents = {name: project for name, project in rows}
    found = []
    for record in records:
        summary = version_summary(record, aliases[record.name])
        data = record.dataset_version
        if data is not None and not decide("dataset", data.dataset.project):
            summary["dataset"] = HIDDEN_LABEL
        parent = parents.get((record.parent or "").partition("@")[0])
        if parent is not None and not decide("model", parent):
            summary["parent"] = HIDDEN_LABEL
        found.append(summary)
    return found


@router.post("/{ref}/mitigate", dependencies=[require("models:write", resource="model")])
def mitigate_version(request: Request, ref: str, body: Mitigate) -> dict[str, Any]:
    """Fit group thresholds for the version and register them as a new version
    (`models mitigate --json`)."""
    from forgeml.governance.fairness import MitigateRequest, mitigate, mitigation_summary

    wanted = MitigateRequest(body.sensitive, body.constraint, body.objective, body.fit_split)
    return mitigation_summary(mitigate(acting(request), ref, wanted))


MAX_IMPORT_BYTES = 256 * 1024 * 1024  # an uploaded ONNX graph, weights included


@router.post(
    "/import",
    dependencies=[require("models:write")],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
async def import_graph(
    request: Request,
    name: Annotated[str, Query(max_length=128, description="Register the graph as this model.")],
) -> dict[str, Any]:
    """Register the uploaded ONNX graph (the request body) as `models import FILE --name N`."""
    import tempfile
    from pathlib import Path

    from starlette.concurrency import run_in_threadpool

    from forgeml.core.errors import PayloadTooLargeError
    from forgeml.tracking.imports import import_onnx

    body = await request.body()
    if len(body) > MAX_IMPORT_BYTES:
        raise PayloadTooLargeError(f"The ONNX file is over {MAX_IMPORT_BYTES} bytes.")

    def register() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="forgeml-upload-") as scratch:
            path = Path(scratch) / "upload.onnx"
            path.write_bytes(body)
            result = import_onnx(acting(request), name, path)
        return {"model": result.model.ref, "source": result.source,
                "digest": result.model.artifact_digest}  # fmt: skip

    return await run_in_threadpool(register)


@router.post("/{name}/promote", dependencies=[require("models:promote", resource="model")])
def promote_version(request: Request, name: str, body: Promote) -> dict[str, Any]:
    """Point `alias` at the version if it beats the holder on `metric` (409 if not)."""
    result = promote(
        acting(request),
        name,
        body.version,
        body.alias,
        body.metric,
        body.mode,
        body.force,
        fairness=FairnessBounds(body.max_dp_diff, body.max_eo_diff),
    )
    return promotion_summary(result)


class CardNotes(BaseModel):
    """`PUT .../versions/{version}/card`: what `models card --intended-use/--limitations` set."""

    model_config = ConfigDict(extra="forbid")

    # blank or long text is refused by `set_card_notes`, in the sentence the CLI prints
    intended_use: str | None = Field(None, description="What the version is for.")
    limitations: str | None = Field(None, description="Where it should not be used.")


@router.get(
    "/{name}/versions/{version}/card", dependencies=[require("models:read", resource="model")]
)
def card(
    request: Request,
    name: str,
    version: PositiveInt,
    card_format: Annotated[
        Literal["md", "html"], Query(alias="format", description="md or html.")
    ] = "md",
) -> dict[str, Any]:
    """The version's model card from its records, as `models card --json` prints it; a
    record of a project the caller may not read is named "in another project" (as lineage)."""
    from forgeml.api._lineage import may_read
    from forgeml.governance.cards import card_summary

    ref = f"{name}@v{version}"
    return card_summary(workspace(request), ref, card_format, may_read=may_read(request))


@router.put(
    "/{name}/versions/{version}/card", dependencies=[require("models:write", resource="model")]
)
def set_card(request: Request, name: str, version: PositiveInt, body: CardNotes) -> dict[str, Any]:
    """Record the version's intended use and/or limitations (audited as the caller)."""
    from forgeml.governance.cards import set_card_notes

    ref = f"{name}@v{version}"
    return set_card_notes(acting(request), ref, body.intended_use, body.limitations)
