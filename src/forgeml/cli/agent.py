"""`forgeml agent run|approve|show`: tool-calling agents from a YAML spec.

A run ends answered (exit 0), waiting for approval (exit 0, with the command that
approves), or stopped by a budget or an error (exit 1, one sentence on stderr); every
run is saved under FORGEML_HOME and traced into MLflow (experiment `forgeml-agents`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from forgeml.cli._output import print_json, say

if TYPE_CHECKING:
    from forgeml.agents import Approvals, RunState, Search, ToolContext
    from forgeml.agents.trace import Tracer

app = typer.Typer(
    help="Agents that call tools, within budgets, with approval.", no_args_is_help=True
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
ApproveFlag = Annotated[
    list[str] | None,
    typer.Option("--approve", metavar="TOOL", help="Let every call of this tool run."),
]
_FAILED = ("max_steps", "max_time", "max_tokens", "error")


def _context() -> tuple[Path, ToolContext, Tracer]:
    from forgeml.agents import ToolContext
    from forgeml.core.workspace import open_workspace
    from forgeml.tracking.traces import MlflowTracer

    workspace = open_workspace()

    def open_index(ref: str) -> Search:
        from forgeml.rag.passages import index_search

        return index_search(workspace, ref)

    context = ToolContext(workspace=workspace, open_index=open_index)
    return workspace.settings.home, context, MlflowTracer(workspace)


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
    from forgeml.agents import Approvals, parse_spec, start_run
    from forgeml.core.configfile import load_yaml

    data = load_yaml(spec_path) or {}
    if max_steps is not None and isinstance(data, dict):
        data = {**data, "budgets": {**(data.get("budgets") or {}), "max_steps": max_steps}}
    spec = parse_spec(data, str(spec_path))
    names = [entry.name for entry in spec.tools]
    for name in approve or ():
        if name not in names:
            from forgeml.core.errors import UsageError

            raise UsageError(
                f"--approve {name}: the agent has no such tool (tools: {', '.join(names)})."
            )
    home, context, tracer = _context()
    state = start_run(
        spec,
        task,
        home=home,
        context=context,
        approvals=Approvals(tools=frozenset(approve or ())),
        tracer=tracer,
    )
    _report(state, as_json)


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
    from forgeml.agents import Approvals, resume_run
    from forgeml.core.errors import UsageError

    if not (call_ids or approve or deny):
        raise UsageError("Name a CALL_ID to approve, --approve TOOL or --deny CALL_ID.")
    approvals: Approvals = Approvals(
        tools=frozenset(approve or ()),
        calls=frozenset(call_ids or ()),
        denied=frozenset(deny or ()),
    )
    home, context, tracer = _context()
    _report(resume_run(run_id, approvals, home=home, context=context, tracer=tracer), as_json)


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="A saved run's id.")],
    as_json: JsonFlag = False,
) -> None:
    """A saved run: how it stopped, its answer, the calls it waits on, its transcript."""
    from forgeml.agents import load_state
    from forgeml.core.config import get_settings

    state = load_state(get_settings().home, run_id)
    if as_json:
        print_json(_summary(state) | {"messages": state.messages})
        return
    _say_summary(state)
    for message in state.messages:
        text = message.get("content") or message.get("tool_calls")
        say(f"[bold]{message['role']}[/bold]: {escape(str(text))}")


def _summary(state: RunState) -> dict[str, Any]:
    return {
        "run_id": state.run_id,
        "stop_reason": state.stop_reason.value if state.stop_reason else None,
        "answer": state.answer,
        "error": state.error,
        "steps": state.steps,
        "tokens": state.tokens,
        "elapsed_s": round(state.elapsed_s, 3),
        "awaiting": [
            {"call_id": c.id, "tool": c.name, "arguments": c.arguments} for c in state.awaiting()
        ],
        "trace_ids": state.trace_ids,
    }


def _say_summary(state: RunState) -> None:
    reason = state.stop_reason.value if state.stop_reason else "running"
    say(f"run {state.run_id}: {reason} after {state.steps} steps, {state.tokens} tokens")
    if state.answer is not None:
        say(escape(state.answer))  # the model's text is not Rich markup
    for call in state.awaiting():
        say(f"waiting: {escape(call.name)}({escape(call.arguments)}) call {escape(call.id)}")
        say(f"  approve with: forgeml agent approve {state.run_id} {call.id}")


def _report(state: RunState, as_json: bool) -> None:
    summary = _summary(state)
    if as_json:
        print_json(summary | {"messages": state.messages})
    else:
        _say_summary(state)
    if summary["stop_reason"] in _FAILED:
        from forgeml.agents import AgentStoppedError

        detail = f": {state.error}" if state.error else "."
        raise AgentStoppedError(
            f"Agent run {state.run_id} stopped ({summary['stop_reason']}) without an answer{detail}"
        )
