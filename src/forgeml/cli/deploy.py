"""`forgeml deploy MODEL_REF --name NAME` and `forgeml deploy list|show|rollback|delete|check`.

`deploy` takes a model reference as its first argument and also has subcommands; a click
group cannot take both, so `_DeployGroup` sends a first argument that is not a
subcommand name (or options first) to the hidden `create` command. A model named like a
subcommand is deployed with `forgeml deploy create MODEL_REF --name NAME`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.core.errors import UsageError
from forgeml.sdk.local import LocalDeployments

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.serve.deployments import Deployment


class _DeployGroup(TyperGroup):
    """A group whose bare `deploy MODEL_REF ...` form means `deploy create MODEL_REF ...`."""

    # `ctx` is typer's vendored click Context, whose class typer does not export
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["create", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_DeployGroup,
    help=(
        "Deploy a model as a named set of model-server processes, and manage deployments.\n\n"
        "forgeml deploy MODEL_REF --name NAME [--replicas N] [--canary MODEL_REF2 --weight 10]"
        " [--shadow MODEL_REF3] [--runtime torch|onnx] [--min-replicas A --max-replicas B"
        " [--target-inflight K | --target-p99-ms M]] [--force]: start the replicas, wait "
        "until they are ready and record them (deploying an existing NAME again is a "
        "zero-downtime update to a new revision; the same spec again needs --force). "
        "See `forgeml deploy create --help` for every option."
    ),
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
Timeout = Annotated[
    float, typer.Option("--timeout", help="Seconds new replicas have to become ready.")
]
Drain = Annotated[
    float,
    typer.Option("--drain", help="Seconds old replicas keep serving after a switch."),
]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _rag_versions(workspace: Workspace, refs: list[str]) -> list[str]:
    """Each `--rag` reference as the NAME@vN it names now: every replica serves that one
    (an index of the deployment's project only: OtherProjectError otherwise)."""
    if not refs:
        return []
    from forgeml.rag.versions import resolve_own

    with workspace.store.session() as session:
        versions = [resolve_own(session, workspace, ref) for ref in refs]
    names = [version.index.name for version in versions]
    if len(set(names)) < len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise UsageError(f"Index '{twice}' is given twice; serve each index once.")
    return [version.ref for version in versions]


def _report(deployment: Deployment, as_json: bool) -> None:
    if as_json:
        print_json(deployment.to_dict())
        return
    spec = deployment.spec
    say(
        f"[bold]{deployment.name}[/bold] revision {deployment.revision}: "
        f"{deployment.status}, serving {spec.model}"
        + (f" (as {spec.model_ref})" if spec.model_ref != spec.model else "")
        + (f", canary {spec.canary.model} at {spec.canary.weight}%" if spec.canary else "")
        + (f", shadow {spec.shadow.model}" if spec.shadow else "")
        + (_autoscale_summary(spec.autoscale) if spec.autoscale else "")
    )
    if deployment.error:
        say(f"last error: {deployment.error}")
    rows = [(r.role, r.model_ref, r.url, r.pid, r.status) for r in deployment.replicas]
    if rows:
        print_table("replicas", ["role", "model", "url", "pid", "status"], rows)


def _autoscale_summary(autoscale: Any) -> str:
    target = (
        f"{autoscale.target_inflight:g} in flight per replica"
        if autoscale.target_inflight is not None
        else f"p99 under {autoscale.target_p99_ms:g} ms"
    )
    return f", autoscaling {autoscale.min_replicas}-{autoscale.max_replicas} replicas at {target}"


@app.command("create", hidden=True)
def create(
    model_ref: Annotated[str, typer.Argument(help="NAME, NAME@vN or NAME@ALIAS.")],
    name: Annotated[str, typer.Option("--name", help="Deployment name (the served name).")],
    replicas: Annotated[int, typer.Option(help="Replicas of the model.")] = 1,
    canary: Annotated[
        str | None, typer.Option(help="A canary model version taking --weight percent.")
    ] = None,
    weight: Annotated[
        int | None, typer.Option(help="Percent of traffic for the canary (default 10).")
    ] = None,
    canary_replicas: Annotated[int, typer.Option(help="Replicas of the canary.")] = 1,
    shadow: Annotated[
        str | None, typer.Option(help="A model version getting a copy of the traffic.")
    ] = None,
    runtime: Annotated[str, typer.Option(help="torch or onnx.")] = "torch",
    max_batch_size: Annotated[int | None, typer.Option(help="Server batch limit.")] = None,
    max_wait_ms: Annotated[float | None, typer.Option(help="Server batching wait.")] = None,
    latency_objective_ms: Annotated[
        float | None, typer.Option(help="p99 each replica should meet, in ms (default 500).")
    ] = None,
    log_sample_rate: Annotated[
        float | None,
        typer.Option(help="Share of requests logged to the deployment's request log (0-1)."),
    ] = None,
    min_replicas: Annotated[
        int | None,
        typer.Option(help="Autoscale: fewest replicas (0: scale to zero when idle)."),
    ] = None,
    max_replicas: Annotated[int | None, typer.Option(help="Autoscale: most replicas.")] = None,
    target_inflight: Annotated[
        float | None,
        typer.Option(help="Autoscale on requests in flight per replica (default 4)."),
    ] = None,
    target_p99_ms: Annotated[
        float | None, typer.Option(help="Autoscale on p99 latency per replica, in ms.")
    ] = None,
    rag: Annotated[
        list[str] | None,
        typer.Option(
            "--rag", metavar="INDEX", help="Serve this RAG index (NAME or NAME@vN); repeatable."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Restart even if NAME already runs this spec.")
    ] = False,
    timeout: Timeout = 120.0,
    drain: Drain = 5.0,
    as_json: JsonFlag = False,
) -> None:
    """Start replicas of MODEL_REF as deployment NAME, wait until ready, record them."""
    from forgeml.serve.deployments import deploy

    workspace = _workspace()
    deployment = deploy(
        workspace,
        name,
        model_ref,
        replicas=replicas,
        canary=canary,
        canary_weight=weight,
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
        rag=_rag_versions(workspace, rag or []),
        force=force,
        ready_timeout=timeout,
        drain_seconds=drain,
    )
    _report(deployment, as_json)


def _deployments() -> Any:
    from forgeml.cli._remote import source

    return source(lambda client: client.deployments, LocalDeployments)


def _from(summary: dict[str, Any]) -> Deployment:
    from forgeml.serve.deployments import Deployment

    return Deployment.from_dict(summary)


@app.command("list")
def list_(
    deleted: Annotated[bool, typer.Option("--deleted", help="Include deleted ones.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Deployments with their status, revision, models and replicas."""
    summaries = _deployments().list(deleted)
    if as_json:
        print_json(summaries)
        return
    print_table(
        "deployments",
        ["name", "status", "revision", "model", "canary", "replicas ready", "updated"],
        [_row(_from(d)) for d in summaries],
    )


def _row(deployment: Deployment) -> tuple[Any, ...]:
    spec = deployment.spec
    ready = sum(r.status == "ready" for r in deployment.replicas)
    canary = f"{spec.canary.model} ({spec.canary.weight}%)" if spec.canary else ""
    return (
        deployment.name,
        deployment.status,
        deployment.revision,
        spec.model,
        canary,
        f"{ready}/{len(deployment.replicas)}",
        when(deployment.updated_at),
    )


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Deployment name.")],
    as_json: JsonFlag = False,
) -> None:
    """A deployment's spec, status and replicas (url, pid, status)."""
    summary = _deployments().show(name)
    if as_json:
        print_json(summary)
        return
    _report(_from(summary), as_json)


@app.command("rollback")
def rollback(
    name: Annotated[str, typer.Argument(help="Deployment name.")],
    to_revision: Annotated[
        int | None, typer.Option("--to-revision", help="Revision to re-apply (default: previous).")
    ] = None,
    timeout: Timeout = 120.0,
    drain: Drain = 5.0,
    as_json: JsonFlag = False,
) -> None:
    """Re-apply an earlier revision's spec as a new revision (zero downtime)."""
    from forgeml.serve.deployments import rollback as rollback_deployment

    deployment = rollback_deployment(
        _workspace(), name, to_revision, ready_timeout=timeout, drain_seconds=drain
    )
    _report(deployment, as_json)


@app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Deployment name.")],
    as_json: JsonFlag = False,
) -> None:
    """Stop every replica of NAME (SIGTERM, then SIGKILL after a grace) and mark it deleted."""
    summary = _deployments().delete(name)
    if as_json:
        print_json(summary)
        return
    say(f"deleted deployment {name} (revision {summary['revision']}); its replicas are stopped")


@app.command("check")
def check(as_json: JsonFlag = False) -> None:
    """Health-check every replica and record replica and deployment statuses."""
    from forgeml.serve.deployments import check as check_deployments

    deployments = check_deployments(_workspace())
    if as_json:
        print_json([d.to_dict() for d in deployments])
        return
    rows = [
        (d.name, d.status, r.role, r.url, r.pid, r.status) for d in deployments for r in d.replicas
    ]
    print_table("replicas", ["deployment", "status", "role", "url", "pid", "replica"], rows)
