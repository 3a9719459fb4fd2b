"""`forgeml agent run|approve|show`: tool-calling agents from a YAML spec.

A run ends answered (exit 0), waiting for approval (exit 0, with the command that
approves), or stopped by a budget or an error (exit 1, one sentence on stderr); every
run is saved under FORGEML_HOME and traced into MLflow (experiment `forgeml-agents`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from forgeml.cli._output import print_json, say

if TYPE_CHECKING:
    from forgeml.agents import RunState

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
    from forgeml.agents.runs import run as run_agent
    from forgeml.core.configfile import load_yaml

    data = load_yaml(spec_path) or {}
    if max_steps is not None and isinstance(data, dict):
        data = {**data, "budgets": {**(data.get("budgets") or {}), "max_steps": max_steps}}
    spec = parse_spec(data, str(spec_path))
    _report(run_agent(spec, task, approve_tools=approve or ()), as_json)


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
    from forgeml.agents.runs import approve as approve_run
    from forgeml.core.errors import UsageError

    if not (call_ids or approve or deny):
        raise UsageError("Name a CALL_ID to approve, --approve TOOL or --deny CALL_ID.")
    state = approve_run(run_id, call_ids or (), deny=deny or (), tools=approve or ())
    _report(state, as_json)


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="A saved run's id.")],
    as_json: JsonFlag = False,
) -> None:
    """A saved run: how it stopped, its answer, the calls it waits on, its transcript."""
    from forgeml.agents.runs import show as show_run
    from forgeml.agents.state import run_summary

    state = show_run(run_id)
    if as_json:
        print_json(run_summary(state) | {"messages": state.messages})
        return
    _say_summary(state)
    for message in state.messages:
        text = message.get("content") or message.get("tool_calls")
        say(f"[bold]{message['role']}[/bold]: {escape(str(text))}")


def _say_summary(state: RunState) -> None:
    reason = state.stop_reason.value if state.stop_reason else "running"
    say(f"run {state.run_id}: {reason} after {state.steps} steps, {state.tokens} tokens")
    if state.answer is not None:
        say(escape(state.answer))  # the model's text is not Rich markup
    for call in state.awaiting():
        say(f"waiting: {escape(call.name)}({escape(call.arguments)}) call {escape(call.id)}")
        say(f"  approve with: forgeml agent approve {state.run_id} {call.id}")


def _report(state: RunState, as_json: bool) -> None:
    from forgeml.agents.state import run_summary

    summary = run_summary(state)
    if as_json:
        print_json(summary | {"messages": state.messages})
    else:
        _say_summary(state)
    if state.stop_reason is not None and state.stop_reason.failed:
        from forgeml.agents import AgentStoppedError

        detail = f": {state.error}" if state.error else "."
        raise AgentStoppedError(
            f"Agent run {state.run_id} stopped ({summary['stop_reason']}) without an answer{detail}"
        )
