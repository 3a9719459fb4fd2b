"""Which project a request acts in, and which project an item route's resource belongs to.

A request acts in the route's `{project}`, else the `X-Forgeml-Project` header (what
`forgeml.client.Client` sends from FORGEML_PROJECT), else the project a web page's browser
chose (`PAGE_PROJECT`), else a `project` query parameter where the route declares one, else
`default`. Creates and lists use that project.

An item route (`/datasets/{name}`, `/runs/{ref}`, ...) declares the kind of its resource
(`require("datasets:read", resource="dataset")`); its caller is authorized in the project the
resource belongs to, read by `RESOURCE_PROJECT[kind]` from the route's path parameters (names
are unique across projects, so a name finds one resource). An unknown resource is
authorized in the request's project, and its route then answers 404 as before. A resource
saved as a file under FORGEML_HOME rather than as a row (an agent run) is read by
`SAVED_RESOURCE_PROJECT[kind]` from the server's home instead.

A route that names its resource in the query string (`/monitor/drift?deployment=NAME`)
declares `resource="served"`, and the lineage route's `{record}` (`KIND:REF` or a bare REF)
the kind `record`: `resource_params` hands each lookup the query parameters with the path
parameters over them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from fastapi import Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from forgeml.auth import DEFAULT_PROJECT
from forgeml.client._settings import PROJECT_HEADER
from forgeml.core.errors import ForgemlError
from forgeml.core.ids import parse_ref, validate_name
from forgeml.core.store import (
    ApiKeyRecord,
    LabelTaskRecord,
    PromptVersionRecord,
    RagIndexRecord,
    dataset_project,
    deployment_project,
    model_project,
)

# kind -> (read session, path parameters, the request's project) -> the resource's project,
# None when none is found; a name that is not unique (runs, jobs) finds the request
# project's resource first
ResourceProject = Callable[[Session, Mapping[str, str], str], str | None]
# kind -> (FORGEML_HOME, path parameters, the request's project) -> the resource's project,
# None when none is found: the resources saved as files under the home, not in the store
SavedResourceProject = Callable[[Path, Mapping[str, str], str], str | None]
# the request state's key for the project a page's browser chose (its `forgeml_project`
# cookie, validated): set by `forgeml.ui` on its page routes only, never on `/api/`
PAGE_PROJECT = "page_project"
# the request state's key for the permission a route's `require` asked: the route acts in
# the project that permission is decided in (`forgeml.api._context.acting_project`)
PERMISSION = "asked_permission"
# the resources a project holds (a `project` column, migrations 0019, 0021, 0022, 0023 and 0024;
# an agent run's saved state), and its cost (its jobs', models' and keys' spend): their
# permissions are decided in the request's project; every other resource (queues and their
# budgets, audit, accounts) lives install-wide, in `default`, so its permissions are
# decided there, whatever project a header names
PARTITIONED = frozenset(
    {
        "datasets", "runs", "models", "jobs", "deployments", "prompts", "rag", "pipelines",
        "labels", "alerts", "agents", "keys", "cost",
    }
)  # fmt: skip
# install-wide resources every project uses, read where the request acts: the queues are
# shared capacity (as Volcano's queues, Kueue's ClusterQueues), so whoever may read queues in
# a project may list and show them (and their budgets) there to submit its jobs to one;
# changing them (`queues:manage`) stays with default's maintainers
SHARED_READS = frozenset({"queues:read"})
# a partitioned kind's permissions that still serve the whole install, decided in `default`:
# Alertmanager's webhook is one URL for every project, and files each alert it receives in
# its subject's project itself (`forgeml.monitor.alerts.receive`)
INSTALL_WIDE = frozenset({"alerts:receive"})


def decision_project(request: Request, permission: str) -> str:
    """The project `permission` is decided in for this request (before an item route's
    resource lookup): `request_project` for a partitioned resource's permission or a read of
    a shared one (`SHARED_READS`); else the route's `{project}` or declared `?project=`, else
    `default` (a header or a page's chosen project naming a project would otherwise let its
    members change the queues, read the audit log or manage accounts, or receive
    Alertmanager's webhook: `INSTALL_WIDE`)."""
    kind = permission.partition(":")[0]
    if kind in (*PARTITIONED, "account") and permission not in INSTALL_WIDE:  # account: anywhere
        return request_project(request)
    if permission in SHARED_READS:
        return request_project(request)
    return _named_project(request) or DEFAULT_PROJECT


def _named_project(request: Request) -> str | None:
    project = request.path_params.get("project")
    if project is None and _declares_project_query(request):
        project = request.query_params.get("project")
    return validate_name(project, "project") if project else None


def request_project(request: Request) -> str:
    """The project a request acts in (InvalidNameError for a malformed one): the route's
    `{project}`, else the `X-Forgeml-Project` header, else the page's chosen project, else a
    `project` query parameter where the route declares one, else `default`.

    The page's chosen project is `request.state.page_project`, which only the UI's page
    middleware sets (from the browser's `forgeml_project` cookie, for paths outside `/api/`):
    an API call, with a bearer token or a session cookie, acts where it did before, and an
    explicit header still wins on a page.
    """
    project = request.path_params.get("project")
    if project is None:
        project = request.headers.get(PROJECT_HEADER)
    if project is None:
        project = getattr(request.state, PAGE_PROJECT, None)
    if project is None and _declares_project_query(request):
        project = request.query_params.get("project")
    return validate_name(project, "project") if project else DEFAULT_PROJECT


def _declares_project_query(request: Request) -> bool:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    return dependant is not None and any(
        param.name == "project" for param in dependant.query_params
    )


def _dataset(session: Session, params: Mapping[str, str], _: str) -> str | None:
    name = parse_ref(params.get("name") or params["ref"], "dataset reference").name
    return dataset_project(session, name)


def _run(session: Session, params: Mapping[str, str], project: str) -> str | None:
    from forgeml.tracking.runs import find_run

    return find_run(session, params["ref"], project).project


def _model(session: Session, params: Mapping[str, str], _: str) -> str | None:
    return model_project(session, params.get("name") or params["ref"])


def _job(session: Session, params: Mapping[str, str], project: str) -> str | None:
    from forgeml.scheduler.jobs import get_job

    return get_job(session, params["ref"], project).project


def _deployment(session: Session, params: Mapping[str, str], _: str) -> str | None:
    return deployment_project(session, params.get("name") or params["ref"])


def _prompt(session: Session, params: Mapping[str, str], _: str) -> str | None:
    name = (params.get("name") or params["ref"]).partition("@")[0]
    return session.scalar(
        select(PromptVersionRecord.project).where(PromptVersionRecord.name == name).limit(1)
    )


def _rag_index(session: Session, params: Mapping[str, str], _: str) -> str | None:
    name = (params.get("name") or params["ref"]).partition("@")[0]
    return session.scalar(select(RagIndexRecord.project).where(RagIndexRecord.name == name))


def _pipeline(session: Session, params: Mapping[str, str], project: str) -> str | None:
    """A pipeline run's `ref`: an id, an id prefix, or a name (the request project's first)."""
    from forgeml.pipelines.runs import get_run

    return get_run(session, params["ref"], project).project


def _label_task(session: Session, params: Mapping[str, str], _: str) -> str | None:
    return session.scalar(
        select(LabelTaskRecord.project).where(LabelTaskRecord.name == params["name"])
    )


def _alert(session: Session, params: Mapping[str, str], project: str) -> str | None:
    """An alert's id, or a prefix of it (the request project's alerts first)."""
    from forgeml.monitor.alerts import find_alert

    return find_alert(session, params["alert_id"], project).project


def _key(session: Session, params: Mapping[str, str], _: str) -> str | None:
    """A gateway key's prefix (or `fml_<prefix>`) or id."""
    from forgeml.gateway import find_key

    record: ApiKeyRecord | None = find_key(session, params["key"])
    return None if record is None else record.project


def _served(session: Session, params: Mapping[str, str], project: str) -> str | None:
    """A monitoring read's `deployment` (else its `model`) query parameter."""
    if "deployment" in params:
        return _deployment(session, {"name": params["deployment"]}, project)
    return _model(session, {"name": params["model"]}, project)


def _record(session: Session, params: Mapping[str, str], project: str) -> str | None:
    """A lineage `record`: `KIND:REF`'s kind, else the first kind a bare REF names (in the
    order lineage tries them: dataset, model, run, deployment)."""
    from forgeml.governance.lineage_refs import REF_KINDS, split_kind

    kind, ref = split_kind(params["record"])
    for tried in (kind,) if kind is not None else REF_KINDS:
        try:
            found = RESOURCE_PROJECT[tried](session, {"ref": ref}, project)
        except ForgemlError:
            continue
        if found is not None:
            return found
    return None


def _agent_run(home: Path, params: Mapping[str, str], _: str) -> str | None:
    from forgeml.agents.state import load_state

    return load_state(home, params["run_id"]).project


RESOURCE_PROJECT: dict[str, ResourceProject] = {
    "dataset": _dataset,
    "run": _run,
    "model": _model,
    "job": _job,
    "deployment": _deployment,
    "prompt": _prompt,
    "rag_index": _rag_index,
    "pipeline": _pipeline,
    "label": _label_task,
    "alert": _alert,
    "key": _key,
    "served": _served,
    "record": _record,
}


SAVED_RESOURCE_PROJECT: dict[str, SavedResourceProject] = {
    "agent_run": _agent_run,
}
# every kind an item route may declare (`require(..., resource=KIND)`)
RESOURCE_KINDS = frozenset(RESOURCE_PROJECT) | frozenset(SAVED_RESOURCE_PROJECT)


def resource_params(request: Request) -> dict[str, str]:
    """What a resource lookup reads: the request's query parameters, its path parameters
    over them."""
    return {**request.query_params, **request.path_params}


def resource_project(
    session: Session, kind: str, params: Mapping[str, str], project: str, *, home: Path
) -> str | None:
    """The project of the `kind` resource the path parameters `params` name (asked in
    `project`; a saved one read under `home`, FORGEML_HOME), or None when they name none (a
    malformed reference included: the route refuses it itself)."""
    try:
        if kind in SAVED_RESOURCE_PROJECT:
            return SAVED_RESOURCE_PROJECT[kind](home, params, project)
        return RESOURCE_PROJECT[kind](session, params, project)
    except (ForgemlError, KeyError):
        return None
