"""What a lineage reference names: `KIND:REF`, or a bare REF looked up in every kind.

A bare reference is tried as a dataset version, a model version, a run and a deployment,
each the way its own commands read it (`adult@v2`, `adult-mlp@production`, a run id or
name, a deployment name); one that names records of two kinds is refused, with the
`KIND:REF` forms that say which.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, get_args

from forgeml.core.errors import InvalidNameError, NotFoundError, UsageError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

RefKind = Literal["dataset", "model", "run", "deployment"]
REF_KINDS: tuple[RefKind, ...] = get_args(RefKind)
# may_read(kind, project): whether the caller may read a record of `kind` in `project` (the
# API's authorizer); what lineage and model cards show of a record it may not read
ReadCheck = Callable[[RefKind, str], bool]
HIDDEN_LABEL = "in another project"


def node_key(kind: str, ref: str) -> str:
    """The id of a lineage node: `kind:ref`."""
    return f"{kind}:{ref}"


def split_kind(ref: str) -> tuple[RefKind | None, str]:
    """`(kind, rest)` of `KIND:REF`, or `(None, ref)` for a bare reference."""
    kind, sep, rest = ref.partition(":")
    for known in REF_KINDS:
        if sep and kind == known:
            return known, rest
    return None, ref


def ref_kinds(workspace: Workspace, ref: str) -> list[RefKind]:
    """The kinds of record `ref` names (its own for `KIND:REF`, without reading)."""
    kind, bare = split_kind(ref)
    if kind is not None:
        return [kind]
    return [found for found, _ in _matches(workspace, bare)[0]]


def resolve_root(workspace: Workspace, ref: str) -> str:
    """The node key (`kind:ref`) of the one record `ref` names.

    Raises:
        NotFoundError: nothing of that kind (or of any kind, for a bare `ref`) has that name.
        UsageError: a bare `ref` names records of two kinds, or is malformed for each.
    """
    kind, bare = split_kind(ref)
    if kind is not None:
        return node_key(kind, _FINDERS[kind](workspace, bare))
    found, refusal = _matches(workspace, bare)
    if len(found) > 1:
        kinds = " and ".join(f"a {_NOUNS[kind]}" for kind, _ in found)
        forms = " or ".join(f"{kind}:{bare}" for kind, _ in found)
        raise UsageError(f"'{bare}' names {kinds}; write {forms} to say which.")
    if found:
        return node_key(*found[0])
    if refusal is not None:
        raise refusal
    raise NotFoundError(
        f"No dataset version, model version, run or deployment is named '{bare}' "
        "(see `forgeml data list`, `models list`, `runs list` or `deploy list`)."
    )


def _matches(
    workspace: Workspace, bare: str
) -> tuple[list[tuple[RefKind, str]], UsageError | None]:
    found: list[tuple[RefKind, str]] = []
    refusal = None
    for kind in REF_KINDS:
        try:
            found.append((kind, _FINDERS[kind](workspace, bare)))
        except (NotFoundError, InvalidNameError):
            continue
        except UsageError as error:  # e.g. a digest prefix two versions share
            refusal = refusal or error
    return found, refusal


def _dataset(workspace: Workspace, ref: str) -> str:
    from forgeml.data import catalog

    with workspace.store.session() as session:
        return catalog.resolve(session, ref).ref


def _model(workspace: Workspace, ref: str) -> str:
    from forgeml.tracking import get_model_version

    return get_model_version(workspace, ref).ref


def _run(workspace: Workspace, ref: str) -> str:
    from forgeml.tracking import get_run

    return get_run(workspace, ref).id


def _deployment(workspace: Workspace, ref: str) -> str:
    from forgeml.serve.deployments import get_deployment

    deployment = get_deployment(workspace, ref)
    if deployment.status == "deleted":
        raise NotFoundError(f"Deployment '{ref}' was deleted; it serves nothing now.")
    return deployment.name


_FINDERS: dict[RefKind, Callable[[Workspace, str], str]] = {
    "dataset": _dataset,
    "model": _model,
    "run": _run,
    "deployment": _deployment,
}
_NOUNS: dict[RefKind, str] = {
    "dataset": "dataset version",
    "model": "model version",
    "run": "run",
    "deployment": "deployment",
}
