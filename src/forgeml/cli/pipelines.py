"""`forgeml pipelines run|list|show|graph|export|trigger`: YAML DAGs of steps, each a cached
job, run by hand or by a trigger."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli import _triggers
from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalPipelines

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

app = typer.Typer(
    help="Pipelines: YAML DAGs of steps run as jobs, cached by content.", no_args_is_help=True
)
app.add_typer(_triggers.app, name="trigger")
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
FileArg = Annotated[Path, typer.Argument(help="The pipeline file (YAML).")]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a key: --set params.lr=0.1 or --set steps.NAME.key=value."
    ),
]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _pipelines() -> Any:
    return source(lambda client: client.pipelines, LocalPipelines)


@app.command("run")
def run(
    file: FileArg,
    overrides: SetOption = None,
    step: Annotated[
        str | None,
        typer.Option(help="Run only this step and the steps it needs (an exported task)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run a pipeline: unchanged steps come from the cache, the others run as jobs."""
    from forgeml.core.errors import ForgemlError
    from forgeml.pipelines import load_pipeline, run_pipeline

    pipeline = load_pipeline(file, overrides or [])  # nothing is recorded when it is invalid
    if step is not None:
        pipeline = pipeline.up_to(step)
    summary = run_pipeline(_workspace(), pipeline)
    if as_json:
        print_json(summary)
    else:
        _print_run(summary)
    if summary["state"] != "SUCCEEDED":
        raise ForgemlError(
            f"Pipeline run {summary['id'][:12]} failed: {summary['error']} "
            f"See `forgeml pipelines show {summary['id'][:12]}`."
        )


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option(min=1, help="At most this many (newest first).")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """List pipeline runs, newest first."""
    runs = _pipelines().list(limit)
    if as_json:
        print_json(runs)
        return
    rows = [
        (r["id"][:12], r["name"], r["state"], f"{r['cached_steps']}/{r['total_steps']}",
         when(r["created_at"]), _seconds(r["seconds"]))
        for r in runs
    ]  # fmt: skip
    print_table("pipeline runs", ["run", "name", "state", "cached", "started", "seconds"], rows)


@app.command("show")
def show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run id, id prefix, or name.")],
    as_json: JsonFlag = False,
) -> None:
    """A run's steps: state, cached or not, times, outputs and errors."""
    summary = _pipelines().show(run_ref)
    if as_json:
        print_json(summary)
        return
    _print_run(summary)


@app.command("graph")
def graph(
    target: Annotated[str, typer.Argument(help="A pipeline file, or a run (id, prefix, name).")],
    overrides: SetOption = None,
    out: Annotated[
        Path | None, typer.Option(help="Also draw it to this file (.svg or .png).")
    ] = None,
) -> None:
    """Draw a pipeline's DAG as text (a run's with each step's state); --out draws a picture."""
    from forgeml.core.errors import UsageError
    from forgeml.pipelines import load_pipeline
    from forgeml.pipelines.graph import render_image, render_text

    if out is not None and out.suffix not in (".svg", ".png"):
        raise UsageError(f"--out {out}: draw to a .svg or .png file.")
    states: dict[str, str] | None = None
    as_file = Path(target)
    if as_file.is_file() or as_file.suffix in (".yaml", ".yml") or "/" in target:
        pipeline = load_pipeline(target, overrides or [])
    else:
        if overrides:
            raise UsageError("--set applies to a pipeline file, not to a recorded run.")
        pipeline, states = _recorded(target)
    sys.stdout.write(render_text(pipeline.needs, pipeline.kinds, states) + "\n")
    if out is not None:
        render_image(pipeline.needs, pipeline.kinds, out, states)
        typer.echo(f"drew {out}", err=True)


def _recorded(ref: str) -> tuple[Any, dict[str, str]]:
    """A recorded run's pipeline and each step's state ("SUCCEEDED (cached)" when cached)."""
    from forgeml.pipelines import find_run
    from forgeml.pipelines.load import recorded_pipeline

    run = find_run(_workspace(), ref)
    states = {s.name: s.state + (" (cached)" if s.cached else "") for s in run.steps}
    return recorded_pipeline(run.spec, run.file), states


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _outputs(outputs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in outputs.items() if k != "digests")


def _print_run(summary: dict[str, Any]) -> None:
    say(
        f"[bold]{summary['name']}[/bold] run {summary['id']}: {summary['state']} "
        f"({summary['cached_steps']}/{summary['total_steps']} steps cached)"
    )
    rows = [
        (s["name"], s["kind"], s["state"], "yes" if s["cached"] else "", _seconds(s["seconds"]),
         _outputs(s["outputs"]) or (s["error"] or ""))
        for s in summary["steps"]
    ]  # fmt: skip
    print_table("steps", ["step", "kind", "state", "cached", "seconds", "outputs / error"], rows)


@app.command()
def export(
    file: FileArg,
    image: Annotated[str, typer.Option(help="The container image with forgeml installed.")],
    format_: Annotated[
        str, typer.Option("--format", help="What to export to: argo (an Argo Workflow).")
    ] = "argo",
    overrides: SetOption = None,
    secret: Annotated[
        str | None,
        typer.Option(help="Kubernetes secret holding FORGEML_DB_URL, FORGEML_ARTIFACTS_URL..."),
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="The workflow's namespace.")] = None,
    workdir: Annotated[
        str, typer.Option(help="Folder of the pipeline file inside the containers.")
    ] = "/forgeml",
    service_account: Annotated[
        str | None, typer.Option(help="Service account the workflow's pods run as.")
    ] = None,
) -> None:
    """Print the pipeline as an Argo Workflow: one task per step, each running the same
    `forgeml pipelines run FILE --step NAME` (the steps before it come from the shared cache).
    """
    from forgeml.core.errors import UsageError
    from forgeml.pipelines import load_pipeline
    from forgeml.pipelines.argo import ArgoOptions, workflow_yaml

    if format_ != "argo":
        raise UsageError(f"Unknown --format '{format_}': the one export format is argo.")
    pipeline = load_pipeline(file, overrides or [])
    options = ArgoOptions(image, secret, namespace, workdir, service_account)
    sys.stdout.write(workflow_yaml(pipeline, overrides or [], options))
