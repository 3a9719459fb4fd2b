"""`forgeml runs list|show|compare`."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from forgeml.cli._fairness import print_fairness
from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalRuns

app = typer.Typer(help="Tracked training runs (MLflow).", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _workspace() -> Any:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _runs() -> Any:
    return source(lambda client: client.runs, LocalRuns)


@app.command("list")
def list_(
    name: Annotated[str | None, typer.Option(help="Only runs of this name.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List runs, newest first (runs whose process died are marked KILLED first)."""
    runs = _runs().list(name)
    if as_json:
        print_json(runs)
        return
    rows = [
        (r["run_id"][:12], r["name"], r["status"], when(r["started_at"]), _headline(r["metrics"]))
        for r in runs
    ]
    print_table("runs", ["run", "name", "status", "started", "metrics"], rows)


def _headline(metrics: dict[str, Any]) -> str:
    keys = [k for k in ("accuracy", "f1", "roc_auc", "rmse", "perplexity", "loss") if k in metrics]
    return "  ".join(f"{k} {metrics[k]:.4g}" for k in keys[:3])


@app.command("show")
def show(
    run: Annotated[str, typer.Argument(help="Run id, id prefix, or name (latest).")],
    as_json: JsonFlag = False,
) -> None:
    """A run's status, config, lineage and final metrics."""
    detail = _runs().show(run)
    if as_json:
        print_json(detail)
        return
    run_id = detail["run_id"]
    say(f"[bold]{detail['name']}[/bold] run {run_id}: {detail['status']}")
    say(f"dataset {detail['dataset']}; started {when(detail['started_at'])}")
    if detail["error"]:
        say(f"error: {detail['error']}")
    metrics = detail["metrics"]
    rows = [(k, f"{v:.4f}") for k, v in metrics.items() if _is_number(v) and "/" not in k]
    print_table("final metrics", ["metric", "value"], rows)
    print_fairness(metrics)
    slices = [k for k in metrics if "/" in k]
    if slices:
        say(f"{len(slices)} per-slice metrics: `forgeml runs show {run_id[:12]} --json`")


@app.command("compare")
def compare(
    runs: Annotated[list[str], typer.Argument(help="The runs to compare.")],
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="Curves to plot (default: train_loss and eval_loss)."),
    ] = None,
    plot: Annotated[Path, typer.Option(help="Where to write the PNG of the curves.")] = Path(
        "runs-compare.png"
    ),
    as_json: JsonFlag = False,
) -> None:
    """A table of final metrics side by side, and a PNG plot of the metric curves."""
    from forgeml.cli._plot import plot_curves

    found = _runs()
    # a run's summary is its detail without the config and dataset (`runs list --json`)
    records = [
        {k: v for k, v in found.show(ref).items() if k not in ("config", "dataset")} for ref in runs
    ]
    keys = sorted({k for r in records for k, v in r["metrics"].items() if _is_number(v)})
    wanted = metric or ["train_loss", "eval_loss"]
    curves = {
        _label(r): {
            name: [(int(step), float(value)) for step, value in points]
            for name, points in found.metrics(r["run_id"], wanted)["metrics"].items()
        }
        for r in records
    }
    plot_curves(curves, plot)
    if as_json:
        print_json({"runs": records, "metrics": keys, "plot": str(plot)})
        return
    header = ["metric", *[_label(r) for r in records]]
    rows = [[k, *[_fmt(r["metrics"].get(k)) for r in records]] for k in keys]
    print_table("final metrics", header, rows)
    say(f"curves written to {plot}")


def _label(run: dict[str, Any]) -> str:
    return f"{run['name']} {run['run_id'][:8]}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if _is_number(value) else ""


@app.command("reproduce")
def reproduce(
    run: Annotated[
        str, typer.Argument(help="Run id, id prefix or name; or a model version (NAME@ALIAS).")
    ],
    data: Annotated[
        str | None,
        typer.Option(help="Train on this dataset version instead (e.g. NAME: the newest)."),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a key of the recorded config (repeatable)."),
    ] = None,
    as_json: JsonFlag = False,
    detach: Annotated[
        bool, typer.Option("--detach", help="Queue the job for `forgeml server`; return at once.")
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="With a server: stream the job's output until it ends.")
    ] = False,
    queue: Annotated[str, typer.Option(help="The scheduler queue to wait in.")] = "default",
) -> None:
    """Train again from a run's recorded config, on the data version it read (or --data)."""
    from forgeml.cli._remote import remote_client

    client = remote_client()
    if client is not None:
        _reproduce_remotely(client, run, data, overrides or [], queue, detach, as_json)
        return
    from forgeml.cli.train import submit_config
    from forgeml.scheduler.submit import JobOptions
    from forgeml.tracking.jobs import TrainJobSpec
    from forgeml.tracking.reproduce import reproduce_config

    with closing(_workspace()) as workspace:
        config = reproduce_config(workspace, run, data, overrides or [])
        spec = TrainJobSpec(config=config.model_dump(mode="json"))
        options = JobOptions(detach=detach, wait=wait, queue=queue)
        submit_config(workspace, config, spec, as_json, "train", options)


def _reproduce_remotely(
    client: Any,
    run: str,
    data: str | None,
    overrides: list[str],
    queue: str,
    detach: bool,
    as_json: bool,
) -> None:
    """Queue the training on the server (its scheduler runs it), as `--detach` does here."""
    from forgeml.cli.train import print_queued
    from forgeml.core.errors import UsageError

    if not detach:
        raise UsageError(
            "In remote mode `forgeml runs reproduce` needs --detach: the server's scheduler "
            "trains, and `forgeml jobs logs -f JOB` follows it."
        )
    queued = client.runs.reproduce(run, data, overrides, queue)
    print_queued(queued["job_id"], queued["state"], as_json)
