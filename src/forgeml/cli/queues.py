"""`forgeml queues create|list|show`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalQueues

app = typer.Typer(help="Queues: weights, capabilities, reclaimable, budgets.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _queues() -> Any:
    return source(lambda client: client.queues, LocalQueues)


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Queue name.")],
    weight: Annotated[int, typer.Option(help="Proportional share of the cluster.")] = 1,
    cpus: Annotated[float | None, typer.Option(help="Cap on CPUs in use.")] = None,
    gpus: Annotated[int | None, typer.Option(help="Cap on GPUs in use.")] = None,
    memory: Annotated[float | None, typer.Option(help="Cap on memory in use (GB).")] = None,
    reclaimable: Annotated[
        bool, typer.Option(help="Its jobs may be preempted for other queues.")
    ] = True,
    budget: Annotated[float | None, typer.Option(help="Spend alert threshold.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a queue (Volcano semantics: weight, capability, reclaimable)."""
    cap = {
        k: v for k, v in {"cpus": cpus, "gpus": gpus, "memory_gb": memory}.items() if v is not None
    }
    fields: dict[str, Any] = {
        "name": name,
        "weight": weight,
        "reclaimable": reclaimable,
        "budget": budget,
    }
    if cap:
        fields["capability"] = cap
    created = _queues().create(fields)
    if as_json:
        print_json(created)
        return
    say(f"queue {created['name']} created (weight {created['weight']})")


def _cap(capability: dict[str, Any] | None) -> str:
    if not capability:
        return "-"
    return ", ".join(f"{k} {v:g}" for k, v in capability.items())


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every queue, with what its jobs are doing."""
    queues = _queues().list()
    if as_json:
        print_json(queues)
        return
    rows = [
        (q["name"], q["weight"], _cap(q["capability"]), q["reclaimable"], q["budget"])
        for q in queues
    ]
    print_table("queues", ["queue", "weight", "capability", "reclaimable", "budget"], rows)


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Queue name.")], as_json: JsonFlag = False
) -> None:
    """A queue's settings and how many of its jobs are in each state."""
    detail = _queues().show(name)
    if as_json:
        print_json(detail)
        return
    say(
        f"[bold]{detail['name']}[/bold]: weight {detail['weight']}, "
        f"capability {_cap(detail['capability'])}, "
        f"reclaimable {detail['reclaimable']}, budget {detail['budget']}"
    )
    print_table("jobs", ["state", "count"], sorted(detail["jobs"].items()))
