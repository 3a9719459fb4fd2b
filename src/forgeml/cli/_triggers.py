"""`forgeml pipelines trigger add|list|remove|firings`: pipelines run by `forgeml server` on
a cron schedule, each new version of a dataset, each alert that fires, or each promotion."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from forgeml.cli._output import print_json, print_table, say, when

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

app = typer.Typer(
    help="Triggers: run a pipeline on a cron schedule, a new dataset version, an alert that "
    "fires or a model promoted (evaluated by `forgeml server`).",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The trigger's name.")],
    file: Annotated[Path, typer.Argument(help="The pipeline file (YAML).")],
    cron: Annotated[
        str | None, typer.Option("--cron", help="A cron expression (UTC), e.g. '0 3 * * *'.")
    ] = None,
    dataset: Annotated[
        str | None, typer.Option("--on-dataset", help="Run on each new version of this dataset.")
    ] = None,
    alert: Annotated[
        str | None,
        typer.Option(
            "--on-alert",
            help="Run when an alert of these rules fires: 'RULE[,RULE][{label=value,...}]'.",
        ),
    ] = None,
    promoted: Annotated[
        str | None,
        typer.Option("--on-promoted", help="Run when MODEL (or MODEL@ALIAS) is promoted."),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a key of the pipeline: --set params.lr=0.1."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the pipeline FILE on each slot of --cron, each new version of --on-dataset, each
    alert of --on-alert that fires, or each promotion of --on-promoted."""
    from forgeml.pipelines.triggers import add_trigger, trigger_summary

    trigger = add_trigger(
        _workspace(),
        name,
        file,
        overrides or [],
        cron=cron,
        dataset=dataset,
        alert=alert,
        promoted=promoted,
    )
    if as_json:
        print_json(trigger_summary(trigger))
        return
    on = {
        "cron": f"cron '{trigger.subject}'",
        "dataset": f"dataset {trigger.subject}",
        "alert": f"alert {trigger.subject}",
        "promoted": f"promotion of {trigger.subject}",
    }
    say(
        f"Trigger {trigger.name}: {trigger.file} on {on[trigger.kind]} (evaluated by "
        "`forgeml server`)."
    )


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """List the triggers."""
    from forgeml.pipelines.triggers import list_triggers, trigger_summary

    triggers = [trigger_summary(trigger) for trigger in list_triggers(_workspace())]
    if as_json:
        print_json(triggers)
        return
    rows = [
        (t["name"], t["kind"], t["on"], t["file"], " ".join(t["overrides"]), t["cursor"])
        for t in triggers
    ]
    print_table("triggers", ["name", "kind", "on", "file", "overrides", "last event"], rows)


@app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="The trigger's name.")]) -> None:
    """Remove a trigger and its firings (jobs already submitted go on)."""
    from forgeml.pipelines.triggers import remove_trigger

    remove_trigger(_workspace(), name)
    say(f"Trigger {name} removed.")


@app.command("firings")
def firings(
    name: Annotated[str | None, typer.Argument(help="Only this trigger's firings.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """The events triggers fired for, newest first, with the job that runs each."""
    from forgeml.pipelines.triggers import list_firings

    found = [dataclasses.asdict(f) for f in list_firings(_workspace(), name, limit)]
    if as_json:
        print_json(found)
        return
    rows = [(f["trigger"], f["event"], when(f["fired_at"]), f["job_id"] or "") for f in found]
    print_table("firings", ["trigger", "event", "fired", "job"], rows)
