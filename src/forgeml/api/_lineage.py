"""`GET /api/v1/lineage/{record}`: what `forgeml lineage REF --json` prints, or its SVG.

The permission is the read of the kind of record `record` names (`datasets:read` for a
dataset version, `models:read`, `runs:read`, `deployments:read`), asked once, before
anything is answered: a bare reference is looked up first to learn its kind (one that
names nothing is asked `datasets:read`, then answered 404), so the caller learns nothing of
a record they may not read. It is asked in the project of the record (the resource kind
`record` of `forgeml.api._projects`), not the request's. The path parameter is `record`,
not `ref`: its grammar is a reference's with an optional `KIND:` before it
(`LINEAGE_REF_PATTERN`).

The graph holds only the records the caller may read: each neighbour's read (the same
permission of its kind) is decided by the app's authorizer in the neighbour's own project
(`Authorizer.allows`); one the caller may not read is an opaque node the walk stops at.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from fastapi import Depends, Path, Query, Request, Response

from forgeml.api._authz import _MARK, Authorizer, Principal
from forgeml.api._context import workspace
from forgeml.api._json import CliRouter
from forgeml.core.ids import REF_PATTERN
from forgeml.governance.lineage import lineage
from forgeml.governance.lineage_draw import to_image
from forgeml.governance.lineage_options import Direction, LineageOptions
from forgeml.governance.lineage_refs import REF_KINDS, ReadCheck, RefKind, ref_kinds

router = CliRouter(prefix="/api/v1/lineage")

_READ: dict[RefKind, str] = {
    "dataset": "datasets:read",
    "model": "models:read",
    "run": "runs:read",
    "deployment": "deployments:read",
}
# REF, or KIND:REF (dataset:, model:, run:, deployment:)
LINEAGE_REF_PATTERN = f"^(({'|'.join(REF_KINDS)}):)?{REF_PATTERN.removeprefix('^')}"
_FIELDS = LineageOptions.model_fields

RecordPath = Annotated[
    str,
    Path(
        pattern=LINEAGE_REF_PATTERN,
        description="A dataset version, model version, run or deployment; KIND:REF when a "
        "bare REF names two kinds.",
    ),
]


def _read_of_its_kind(request: Request, record: RecordPath) -> Principal:
    kinds = ref_kinds(workspace(request), record)
    authorizer: Authorizer = request.app.state.authorizer
    request.state.resource_kind = "record"  # authorized in the record's project
    principal = authorizer.authorize(request, _READ[kinds[0] if kinds else "dataset"])
    request.state.principal = principal
    return principal


def may_read(request: Request) -> ReadCheck:
    """Whether the caller of `request` may read a record of a kind in a project: the read
    the route asks of that kind, decided by the app's authorizer (once per kind and
    project)."""
    authorizer: Authorizer = request.app.state.authorizer

    @cache
    def decide(kind: RefKind, project: str) -> bool:
        return authorizer.allows(request, _READ[kind], project)

    return decide


# what the route declares (`route_permission`, the role matrix): the read it asks of a ref
# that names nothing; a ref of another kind asks that kind's read instead
setattr(_read_of_its_kind, _MARK, _READ["dataset"])


@router.get(
    "/{record}",
    dependencies=[Depends(_read_of_its_kind)],
    responses={200: {"content": {"image/svg+xml": {}}}},
)
def show_lineage(
    request: Request,
    record: RecordPath,
    depth: Annotated[int | None, Query(ge=0, description=_FIELDS["depth"].description)] = None,
    direction: Annotated[Direction, Query(description=_FIELDS["direction"].description)] = "both",
    picture: Annotated[
        Literal["json", "svg"],
        Query(alias="format", description="json (nodes and edges) or svg (the drawing)."),
    ] = "json",
) -> Any:
    """The lineage around `record`: raw files, dataset versions, runs, model versions and
    deployments, as `forgeml lineage REF --json` prints it (or drawn, as SVG)."""
    found = lineage(workspace(request), record, depth, direction, may_read=may_read(request))
    if picture == "svg":
        return Response(to_image(found, "svg"), media_type="image/svg+xml")
    return found.to_dict()
