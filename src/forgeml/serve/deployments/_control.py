"""Applying specs: keep or start replicas, switch the records, stop the old; delete; check."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.core.config import Settings
from forgeml.core.errors import (
    AlreadyExistsError,
    NotFoundError,
    ServiceUnavailableError,
    UsageError,
)
from forgeml.core.ids import validate_name
from forgeml.serve import _supervisor
from forgeml.serve.deployments import _records
from forgeml.serve.deployments._records import get_deployment, list_deployments
from forgeml.serve.deployments._spec import (
    Deployment,
    DeploymentSpec,
    Replica,
    build_spec,
    check_own_models,
)

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace


def deploy(
    workspace: Workspace,
    name: str,
    model_ref: str,
    replicas: int = 1,
    canary: str | None = None,
    canary_weight: int | None = None,
    canary_replicas: int = 1,
    shadow: str | None = None,
    runtime: str = "torch",
    max_batch_size: int | None = None,
    max_wait_ms: float | None = None,
    latency_objective_ms: float | None = None,
    log_sample_rate: float | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    target_inflight: float | None = None,
    target_p99_ms: float | None = None,
    rag: list[str] | None = None,
    force: bool = False,
    ready_timeout: float = 120.0,
    drain_seconds: float = 5.0,
) -> Deployment:
    """Start replicas of `model_ref` as deployment `name` (a new revision if it exists).

    Args:
        workspace: The workspace whose store records the deployment.
        name: The deployment name; also the model name every replica serves.
        model_ref: The primary model (NAME, NAME@vN, NAME@ALIAS; recorded as NAME@vN).
        replicas: Processes serving the primary model.
        canary: A second model version taking `canary_weight` percent of the traffic.
        canary_weight: 0-100; default 10 when there is a canary.
        canary_replicas: Processes serving the canary.
        shadow: A model version that gets a copy of the traffic (one process).
        runtime: "torch" or "onnx" (the model needs a model.onnx).
        max_batch_size: The servers' dynamic-batching limit (default: theirs).
        max_wait_ms: The servers' batching wait (default: theirs).
        latency_objective_ms: The p99 each replica should meet, exported for the alert rule
            (default: the servers', 500 ms).
        log_sample_rate: Share of requests the primary and canary replicas write to the
            deployment's request log (default: the servers', none).
        min_replicas: With `max_replicas`, the autoscaler's bounds on primary replicas
            (0: scale to zero when idle); `replicas` is then the starting count.
        max_replicas: The most primary replicas the autoscaler runs.
        target_inflight: Requests in flight per replica to aim at (default 4).
        target_p99_ms: Or the p99 latency each replica should stay under.
        rag: RAG index versions every replica serves (`forgeml serve --rag`); give
            NAME@vN (the CLI resolves NAME), so every replica serves the same version.
        force: Restart every replica, even if `name` already runs exactly this spec.
        ready_timeout: Seconds the new replicas have to answer `/v2/health/ready`.
        drain_seconds: Seconds replaced replicas keep serving after the records switch.

    A replica of the current revision that serves the same role and model with the same
    `forgeml serve` arguments and environment keeps running (see `_apply`); `force`
    restarts them all.

    Returns:
        The deployment as recorded, status "ready".

    Raises:
        ConfigError, NotFoundError, UsageError: bad options or model references.
        AlreadyExistsError: `name` already runs this spec and `force` is not set.
        ServiceUnavailableError: a replica did not start; nothing new is left running.
    """
    validate_name(name, "deployment name")
    spec = build_spec(
        workspace,
        model_ref,
        replicas=replicas,
        canary=canary,
        canary_weight=canary_weight,
        canary_replicas=canary_replicas,
        shadow=shadow,
        runtime=runtime,
        max_batch_size=max_batch_size,
        max_wait_ms=max_wait_ms,
        latency_objective_ms=latency_objective_ms,
        log_sample_rate=log_sample_rate,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        target_inflight=target_inflight,
        target_p99_ms=target_p99_ms,
        rag=rag,
    )
    return apply_spec(workspace, name, spec, force, ready_timeout, drain_seconds)


def apply_spec(
    workspace: Workspace,
    name: str,
    spec: DeploymentSpec,
    force: bool = False,
    ready_timeout: float = 120.0,
    drain_seconds: float = 5.0,
) -> Deployment:
    """Run `spec` as deployment `name`; see `deploy` (which builds the spec from options).

    Raises:
        AlreadyExistsError: `name` already runs `spec` and `force` is not set, or is a
            deployment of another project.
        NotFoundError: a model version of `spec` is not registered.
        OtherProjectError: a model version of `spec` belongs to another project (refused
            before any replica starts, with nothing recorded).
        ServiceUnavailableError: a replica did not start; nothing new is left running.
    """
    validate_name(name, "deployment name")
    current = _records.find(workspace, name)
    if current is not None and current.project != workspace.project:
        # names stay unique across projects: a deployment changes in its own project only
        raise AlreadyExistsError(
            f"A deployment called {name!r} exists already, in the project "
            f"{current.project!r}; pick another name."
        )
    # every path that runs a spec comes here (deploy, traffic, a pipeline's deploy or
    # canary step): the one place a deployment is kept to its own project's models
    check_own_models(workspace, spec)
    live = current is not None and current.status not in ("deleted", "failed")
    # compared as specs: one stored before a field existed reads back with its default
    same = current is not None and DeploymentSpec.model_validate(current.spec) == spec
    if live and current is not None and same and not force:
        raise AlreadyExistsError(
            f"Deployment '{name}' already runs this spec (revision {current.revision}); "
            "change the model or options, or pass --force to restart its replicas."
        )
    action = "deployment.update" if live else "deployment.create"
    revision = (current.revision if current is not None else 0) + 1
    return _apply(
        workspace, name, spec, action, revision, ready_timeout, drain_seconds, keep=not force
    )


def rollback(
    workspace: Workspace,
    name: str,
    to_revision: int | None = None,
    ready_timeout: float = 120.0,
    drain_seconds: float = 5.0,
) -> Deployment:
    """Re-apply an earlier revision's spec (default: the one before the current) as new.

    Replicas the two specs share are kept, as `apply_spec` keeps them (rolling back a
    canary start stops only the canary).

    Raises:
        NotFoundError: no such deployment or revision.
        UsageError: `to_revision` is the current revision.
        OtherProjectError: a model version of that revision belongs to another project.
        ServiceUnavailableError: a replica did not start; the current one keeps serving.
    """
    current = _records.require(workspace, name)
    if to_revision is None and current.revision < 2:
        raise NotFoundError(f"Deployment '{name}' has no earlier revision to roll back to.")
    target = current.revision - 1 if to_revision is None else to_revision
    if target == current.revision:
        raise UsageError(f"Deployment '{name}' is already at revision {target}.")
    stored = _records.revision_spec(workspace, current, target)
    if stored is None:
        raise NotFoundError(
            f"Deployment '{name}' has no revision {target} "
            f"(its revisions are 1..{current.revision})."
        )
    spec = DeploymentSpec.model_validate(stored)
    # the versions must still be registered, and of the deployment's project
    check_own_models(workspace.in_project(current.project), spec)
    revision = current.revision + 1
    return _apply(
        workspace,
        name,
        spec,
        "deployment.rollback",
        revision,
        ready_timeout,
        drain_seconds,
        keep=True,
    )


def delete(workspace: Workspace, name: str, grace_seconds: float = 10.0) -> Deployment:
    """Mark `name` deleted (callers stop routing to it), then stop its processes.

    Raises:
        NotFoundError: no such deployment, or it is deleted already.
    """
    _records.require(workspace, name)
    servers = _records.mark_deleted(workspace, name)
    _supervisor.stop(servers, grace_seconds)
    return get_deployment(workspace, name)


def check(workspace: Workspace) -> list[Deployment]:
    """Probe every replica of every live deployment and record what was found.

    A replica is "stopped" when its process is gone, "unhealthy" when it does not answer
    ready, else "ready"; a deployment is "ready" when all its replicas are, "failed"
    when no primary replica is, else "degraded". Changes are audited.
    """
    # probe outside any transaction: a slow replica must not hold the store's write lock
    found: dict[str, dict[str, str]] = {}
    for deployment in list_deployments(workspace):
        found[deployment.name] = {
            replica.url: _replica_health(replica)
            for replica in deployment.replicas
            if replica.status not in _records.LOOP_OWNED
        }
    _records.record_health(workspace, found)
    return list_deployments(workspace)


def _replica_health(replica: Replica | _records.KeptReplica) -> str:
    if replica.pid is None or not _supervisor.is_running(replica.pid, replica.port):
        return "stopped"
    return "ready" if _supervisor.probe(replica.url) else "unhealthy"


def _apply(
    workspace: Workspace,
    name: str,
    spec: DeploymentSpec,
    action: str,
    revision: int,
    ready_timeout: float,
    drain_seconds: float,
    keep: bool,
) -> Deployment:
    """Keep what `keep` allows, start the rest of `spec`'s replicas, switch, stop the old.

    A current replica is kept (`_keepable`) when it is plainly ready and would be started
    exactly as it runs; the others start with logs `r{revision}-{role}-{k}.log` (k: its
    place in `spec.plan()`), and every current replica not kept is stopped after
    `drain_seconds`. If a kept one changes before the switch (the autoscaler drained it,
    say), its places are started too and the switch is retried keeping nothing.
    """
    plan = spec.plan()
    kept = _keepable(workspace, name, spec) if keep else {}
    started = _start(
        workspace,
        name,
        spec,
        revision,
        ready_timeout,
        [i for i in range(len(plan)) if i not in kept],
    )
    try:
        try:
            old = _records.switch(
                workspace, name, spec, [kept.get(i) or started[i] for i in range(len(plan))], action
            )
        except _records.KeptReplicaGoneError:
            started.update(_start(workspace, name, spec, revision, ready_timeout, list(kept)))
            old = _records.switch(
                workspace, name, spec, [started[i] for i in range(len(plan))], action
            )
    except BaseException:
        _supervisor.stop([(s.pid, s.port) for s in started.values()], grace_seconds=5.0)
        raise
    if old:
        try:
            time.sleep(drain_seconds)
        finally:
            # the records no longer list them: never leave them running unrecorded
            _supervisor.stop(old)
    return get_deployment(workspace, name)


def _keepable(
    workspace: Workspace, name: str, spec: DeploymentSpec
) -> dict[int, _records.KeptReplica]:
    """The current replicas `spec` can keep, by their place in `spec.plan()`.

    One is kept for a place with its role and model when it is recorded "ready" (never
    one the autoscaler is starting or draining), its process still runs on its port and
    answers ready (as `check` probes), its `forgeml serve` arguments are the same under
    the current and the new spec, and its command line and serving environment are the
    ones it would be started with now.
    """
    current = _records.find(workspace, name)
    if current is None:
        return {}
    old_spec = DeploymentSpec.model_validate(current.spec)
    env = server_env(workspace)
    candidates = _records.ready_replicas(workspace, name)
    kept: dict[int, _records.KeptReplica] = {}
    for place, (role, model) in enumerate(spec.plan()):
        args = server_args(name, spec, model, role)
        if args != server_args(name, old_spec, model, role):
            continue
        for replica in candidates:
            if (replica.role, replica.model_ref) != (role, model) or replica in kept.values():
                continue
            launch = _supervisor.launch_of(replica.pid)
            if (
                launch is not None
                and launch[0] == _supervisor.server_command(args, replica.port)
                and _serving_env(launch[1]) == _serving_env(env)
                and _replica_health(replica) == "ready"
            ):
                kept[place] = replica
                break
    return kept


def _serving_env(env: Mapping[str, str]) -> tuple[str, str, str | None]:
    """What a replica's environment must match to be kept: the store and artifacts it
    records to (as resolved: a pipeline job names the default ones explicitly) and the
    import path. Not the acting user, a job's FORGEML_JOB_* or the GPUs a job was given,
    which a canary step run as a job differs in."""
    home = env.get("FORGEML_HOME")
    settings = Settings(
        home=Path(home) if home else Path(".forgeml"),
        db_url=env.get("FORGEML_DB_URL") or None,
        artifacts_url=env.get("FORGEML_ARTIFACTS_URL") or None,
    )
    return settings.database_url, settings.artifact_root, env.get("PYTHONPATH")


def server_env(workspace: Workspace) -> dict[str, str]:
    """This process's environment, pointed at the same workspace and acting in its project
    (the deployment's: a replica serves the RAG indexes of that project only)."""
    from forgeml.scheduler.contract import JOB_PROJECT_ENV

    settings = workspace.settings
    env = dict(os.environ)
    env["FORGEML_HOME"] = str(Path(settings.home).resolve())
    env["FORGEML_USER"] = workspace.actor
    env[JOB_PROJECT_ENV] = workspace.project
    for key, value in (
        ("FORGEML_DB_URL", settings.db_url),
        ("FORGEML_ARTIFACTS_URL", settings.artifacts_url),
    ):
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    return env


def server_args(name: str, spec: DeploymentSpec, model: str, role: str) -> list[str]:
    """The `forgeml serve` arguments of one replica of `role` serving `model`."""
    args = [model, "--name", name, "--runtime", spec.runtime]
    # the shadow answers copies of requests under the same ids: it stays out of the log
    if spec.log_sample_rate is not None and role != "shadow":
        args += ["--log-sample-rate", f"{spec.log_sample_rate:g}"]
    if spec.max_batch_size is not None:
        args += ["--max-batch-size", str(spec.max_batch_size)]
    if spec.max_wait_ms is not None:
        args += ["--max-wait-ms", f"{spec.max_wait_ms:g}"]
    if spec.latency_objective_ms is not None:
        args += ["--latency-objective-ms", f"{spec.latency_objective_ms:g}"]
    for index in spec.rag:
        args += ["--rag", index]
    return args


def log_dir(workspace: Workspace, name: str) -> Path:
    """Where the replicas of deployment `name` write their logs."""
    return Path(workspace.settings.home) / "logs" / "deployments" / validate_name(name)


def _start(
    workspace: Workspace,
    name: str,
    spec: DeploymentSpec,
    revision: int,
    ready_timeout: float,
    places: Sequence[int],
) -> dict[int, _supervisor.ServerProcess]:
    """Start the replicas at `places` in `spec.plan()` and wait until all are ready.

    Raises:
        ServiceUnavailableError: one did not start (recorded); none started is left running.
    """
    plan = spec.plan()
    launches = [
        (
            server_args(name, spec, plan[place][1], plan[place][0]),
            log_dir(workspace, name) / f"r{revision}-{plan[place][0]}-{place + 1}.log",
        )
        for place in places
    ]
    try:
        servers = _supervisor.start_all(launches, server_env(workspace), ready_timeout)
    except _supervisor.ReplicaStartError as error:
        role, model = plan[places[error.index]]
        summary = f"its {role} replica ({model}) {error}"
        _records.record_failure(workspace, name, spec, summary, error)
        last = error.log_tail.splitlines()[-1:] or ["(empty)"]
        raise ServiceUnavailableError(
            f"Deployment '{name}' did not start: {summary}; its log ends: {last[0].strip()}"
        ) from None
    return dict(zip(places, servers, strict=True))
