"""`forgeml agent run|approve|show`: tool-calling agents from a YAML spec.

A run ends answered (exit 0), waiting for approval (exit 0, with the command that
approves), or stopped by a budget or an error (exit 1, one sentence on stderr); every
run is saved under FORGEML_HOME and traced into MLflow (experiment `forgeml-agents`). A run
belongs to FORGEML_PROJECT (its tools read that project's datasets, indexes and
deployments), and only that project approves it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from forgeml.cli._output import print_json, say
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalAgents

# a run as `agent show --json` prints it: `run_summary` and the transcript
Shown = dict[str, Any]

app = typer.Typer(
    help="Agents that call tools, within budgets, with approval.", no_args_is_help=True
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
ApproveFlag = Annotated[
    list[str] | None,
    typer.Option("--approve", metavar="TOOL", help="Let every call of this tool run."),
]


@app.command("run")
def run(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="The agent's YAML spec.")],
    task: Annotated[str, typer.Argument(metavar="TASK", help="What to do, in words.")],
    approve: ApproveFlag = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Model calls at most (overrides the spec's budget).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run an agent on a task until it answers, waits for approval, or spends a budget."""
    from forgeml.agents import parse_spec
    from forgeml.core.configfile import load_yaml

    data = load_yaml(spec_path) or {}
    if max_steps is not None and isinstance(data, dict):
        data = {**data, "budgets": {**(data.get("budgets") or {}), "max_steps": max_steps}}
    parse_spec(data, str(spec_path))  # checked here, naming the file, on either side
    # remotely driven by the server and followed here until it stops; locally, driven here
    agents = _agents()
    started = agents.start(data, task, approve or ())
    _report(agents.wait(started["run_id"]), as_json)


@app.command("approve")
def approve_(
    run_id: Annotated[str, typer.Argument(help="The run waiting for approval.")],
    call_ids: Annotated[
        list[str] | None, typer.Argument(metavar="CALL_ID...", help="Calls to let run.")
    ] = None,
    approve: ApproveFlag = None,
    deny: Annotated[
        list[str] | None,
        typer.Option("--deny", metavar="CALL_ID", help="A call not to run (the model is told)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Resume a run that waits for approval, letting the named calls (or tools) run."""
    from forgeml.core.errors import UsageError

    if not (call_ids or approve or deny):
        raise UsageError("Name a CALL_ID to approve, --approve TOOL or --deny CALL_ID.")
    agents = _agents()
    agents.approve(run_id, call_ids or (), deny or (), approve or ())
    _report(agents.wait(run_id), as_json)


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="A saved run's id.")],
    as_json: JsonFlag = False,
) -> None:
    """A saved run: how it stopped, its answer, the calls it waits on, its transcript."""
    shown = _agents().show(run_id)
    if as_json:
        print_json(shown)
        return
    _say_summary(shown)
    for message in shown["messages"]:
        text = message.get("content") or message.get("tool_calls")
        say(f"[bold]{message['role']}[/bold]: {escape(str(text))}")


def _agents() -> Any:
    return source(lambda client: client.agents, LocalAgents)


def _say_summary(shown: Shown) -> None:
    reason = shown["stop_reason"] or "running"
    run_id = shown["run_id"]
    say(f"run {run_id}: {reason} after {shown['steps']} steps, {shown['tokens']} tokens")
    if shown["answer"] is not None:
        say(escape(shown["answer"]))  # the model's text is not Rich markup
    for call in shown["awaiting"]:
        name, arguments, call_id = call["tool"], call["arguments"], call["call_id"]
        say(f"waiting: {escape(name)}({escape(arguments)}) call {escape(call_id)}")
        say(f"  approve with: forgeml agent approve {run_id} {call_id}")


def _report(shown: Shown, as_json: bool) -> None:
    from forgeml.agents import AgentStoppedError
    from forgeml.agents.state import StopReason

    if as_json:
        print_json(shown)
    else:
        _say_summary(shown)
    reason = shown["stop_reason"]
    if reason is not None and StopReason(reason).failed:
        detail = f": {shown['error']}" if shown["error"] else "."
        raise AgentStoppedError(
            f"Agent run {shown['run_id']} stopped ({reason}) without an answer{detail}"
        )
