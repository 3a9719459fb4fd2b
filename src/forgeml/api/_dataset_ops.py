"""Dataset routes beyond the catalog: rows, diff, SQL, rebuild and transforms.

`frame` answers a version's rows (or one split's, or the first `limit`) as an Arrow IPC
stream, which the CLI reads back into the very frame the local `data head|export` print or
write. `diff`, `query`, `rebuild` and `derive` answer what `data diff|query|rebuild|TRANSFORM
--json` print. A query is read-only (`forgeml.data.query`), capped in rows and in time.
"""

from __future__ import annotations

import io
from typing import Annotated, Any, Literal

from fastapi import Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from forgeml.api._authz import require
from forgeml.api._context import acting, workspace
from forgeml.api._json import CliRouter
from forgeml.data import catalog

router = CliRouter(prefix="/api/v1/datasets")

ARROW_STREAM = "application/vnd.apache.arrow.stream"
REF_HEADER = "X-Dataset-Ref"
MAX_QUERY_ROWS = 10_000
QUERY_TIMEOUT_S = 60.0
Split = Literal["train", "validation", "test"]


@router.get(
    "/{ref}/frame",
    dependencies=[require("datasets:read", resource="dataset")],
    response_class=Response,
    responses={200: {"content": {ARROW_STREAM: {}}}},
)
def frame(
    request: Request,
    ref: str,
    split: Split | None = None,
    limit: Annotated[int | None, Query(ge=0, description="Only the first rows.")] = None,
) -> Response:
    """The version's rows (`data head|export`), as an Arrow IPC stream; the header
    `X-Dataset-Ref` names the version resolved. 403 `other_project`: a dataset of another
    project than the request's (its rows are read acting in its project)."""
    home = workspace(request)
    with home.store.session() as session:
        version = catalog.resolve_to_read(home, session, ref)
    rows = catalog.read_frame(home, version, split)
    if limit is not None:
        rows = rows.head(limit)
    buffer = io.BytesIO()
    rows.write_ipc_stream(buffer)
    return Response(buffer.getvalue(), media_type=ARROW_STREAM, headers={REF_HEADER: version.ref})


@router.get("/{ref}/diff", dependencies=[require("datasets:read", resource="dataset")])
def diff(
    request: Request,
    ref: str,
    to: Annotated[str, Query(max_length=256, description="The newer version.")],
) -> dict[str, Any]:
    """Schema, row-count and per-column statistic changes from `ref` to `to` (`data diff`)."""
    from forgeml.data import quality

    home = workspace(request)
    with home.store.session() as session:
        a, b = catalog.resolve(session, ref), catalog.resolve(session, to)
    changes = quality.diff(catalog.profile_of(home, a), catalog.profile_of(home, b))
    return {"from": a.ref, "to": b.ref, **changes}


class SqlQuery(BaseModel):
    """`POST /api/v1/datasets/query`: one read-only statement over the datasets."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1, max_length=100_000, description='One SELECT; "NAME@vN".')
    limit: int = Field(100, ge=1, le=MAX_QUERY_ROWS, description="At most this many rows.")


@router.post("/query", dependencies=[require("datasets:read")])
def query(request: Request, body: SqlQuery) -> dict[str, Any]:
    """The statement's columns and first `limit` rows (`data query`); 403 for a statement
    that writes, reaches files or names a dataset of another project than the request's,
    400 for one that fails or runs past the time limit."""
    from forgeml.data.query import run_query

    table = run_query(workspace(request), body.sql, body.limit, timeout_s=QUERY_TIMEOUT_S)
    return {"columns": table.column_names, "rows": table.to_pylist()}


@router.post("/{ref}/rebuild", dependencies=[require("datasets:read", resource="dataset")])
def rebuild(request: Request, ref: str) -> dict[str, Any]:
    """Re-derive the version from its recipe (an upload from the bytes kept of it) and
    compare digests (`data rebuild`); 500 when they differ, 404 when a source is gone."""
    from forgeml.data.pipeline import rebuild as rebuild_version

    rebuilt = rebuild_version(workspace(request), ref)
    return {"ref": rebuilt.ref, "digest": rebuilt.expected, "actual": rebuilt.actual}


class Derivation(BaseModel):
    """`POST /api/v1/datasets/{ref}/derive`: a transform of the version, as the CLI's
    `data clean|validate|redact|split|augment|features` run it."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["clean", "validate", "redact", "split", "augment", "features"]
    params: dict[str, Any] = Field(description="The transform's recipe (its params).")
    name: str | None = Field(None, max_length=128, description="Record into this dataset.")
    spec_name: str | None = Field(None, max_length=128, description="For features.")


@router.post(
    "/{ref}/derive", status_code=201, dependencies=[require("datasets:write", resource="dataset")]
)
def derive(request: Request, ref: str, body: Derivation) -> dict[str, Any]:
    """Apply the transform and record its outputs as versions, audited as the caller."""
    from forgeml.data.pipeline import derive as derive_version
    from forgeml.data.pipeline import derived_summary

    derived = derive_version(
        acting(request), body.op, ref, body.params, name=body.name, spec_name=body.spec_name
    )
    return derived_summary(derived)
