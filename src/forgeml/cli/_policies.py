"""`forgeml monitor policy apply|list|show|remove`: the closed loop per deployment."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from forgeml.cli._output import print_json, print_table, say, when

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

app = typer.Typer(
    help="Monitoring policies: which alert retrains a deployment's model, the gate and the "
    "canary that promote it or roll it back (run by `forgeml server`).",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


@app.command("apply")
def apply(file: Annotated[Path, typer.Argument(help="The policy file (YAML).")]) -> None:
    """Check a policy, write its pipeline beside it and (re)place its alert trigger."""
    from forgeml.monitor.loop import apply_policy

    trigger = apply_policy(_workspace(), file)
    say(
        f"Policy {trigger.name.removeprefix('policy-')}: alerts {trigger.subject} run "
        f"{trigger.file} (retrain -> gate -> canary), evaluated by `forgeml server`."
    )


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """The applied policies."""
    from forgeml.monitor.loop import list_policies, policy_summary

    found = [policy_summary(trigger) for trigger in list_policies(_workspace())]
    if as_json:
        print_json(found)
        return
    rows = [(p["name"], p["on"], p["pipeline"], when(p["applied_at"])) for p in found]
    print_table("policies", ["name", "on alerts", "pipeline", "applied"], rows)


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The policy's name.")], as_json: JsonFlag = False
) -> None:
    """What the loop did for a policy: each alert, retraining, gate and canary, in order."""
    from forgeml.monitor.loop import loop_timeline

    events = loop_timeline(_workspace(), name)
    if as_json:
        print_json([dataclasses.asdict(event) for event in events])
        return
    rows = [(when(e.at), e.what, e.detail) for e in events]
    print_table(f"policy {name}", ["at", "what", "detail"], rows)


@app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="The policy's name.")]) -> None:
    """Stop applying a policy (a loop already running goes on)."""
    from forgeml.monitor.loop import remove_policy

    remove_policy(_workspace(), name)
    say(f"Policy {name} removed.")
