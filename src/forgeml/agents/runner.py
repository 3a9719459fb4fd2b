"""Start an agent run from a spec and a task, or resume one that waits for approval.

Every run, however it stops, is saved under FORGEML_HOME (`state.save_state`) with its
spec, so `resume_run` needs only its id and the approvals.
"""

from __future__ import annotations

import time
from pathlib import Path

from forgeml.agents._calls import Approvals
from forgeml.agents.builtins import ToolContext
from forgeml.agents.loop import Clock, run_loop
from forgeml.agents.spec import AgentSpec, build_registry
from forgeml.agents.state import RunState, StopReason, load_state, save_state
from forgeml.agents.trace import Tracer
from forgeml.core.errors import ForgemlError, NotFoundError
from forgeml.core.ids import new_id
from forgeml.prompts.client import ChatClient, ChatModel, api_key_from_env

__all__ = ["AgentStoppedError", "RunNotWaitingError", "resume_run", "start_run"]

_REPLY_TIMEOUT_S = 120.0


class AgentStoppedError(ForgemlError):
    """A run stopped on a budget (steps, time, tokens) or an error before it answered."""


class RunNotWaitingError(ForgemlError):
    """An approval was sent to a run that is not waiting for one."""

    http_status = 409


def start_run(
    spec: AgentSpec,
    task: str,
    *,
    home: Path,
    context: ToolContext,
    approvals: Approvals | None = None,
    model: ChatModel | None = None,
    clock: Clock = time.monotonic,
    tracer: Tracer | None = None,
) -> RunState:
    """Run `task` with the agent `spec` describes; the run is saved however it stops.

    Args:
        spec: The agent (model endpoint, system prompt, tools, budgets).
        task: The user's request.
        home: FORGEML_HOME, where the run is saved.
        context: What the built-in tools need (workspace, RAG indexes).
        approvals: Tools approved up front (`--approve NAME`).
        model: The chat model; default a `ChatClient` for `spec.model`.
        clock: Seconds, monotonic.
        tracer: Where spans go.
    """
    messages = [{"role": "system", "content": spec.system}, {"role": "user", "content": task}]
    state = RunState(run_id=new_id(), spec=spec.model_dump(mode="json"), messages=messages)
    return _drive(spec, state, home, context, approvals, model, clock, tracer)


def resume_run(
    run_id: str,
    approvals: Approvals,
    *,
    home: Path,
    context: ToolContext,
    model: ChatModel | None = None,
    clock: Clock = time.monotonic,
    tracer: Tracer | None = None,
) -> RunState:
    """Resume a run that waits for approval, with the calls or tools now approved or denied.

    The decision is written to the audit log when `context` has a workspace.

    Raises:
        NotFoundError: no such run, or an approved or denied call id it does not wait on.
        RunNotWaitingError: the run is not waiting for approval.
    """
    state = load_state(home, run_id)
    if state.stop_reason is not StopReason.AWAITING_APPROVAL:
        raise RunNotWaitingError(
            f"Agent run {run_id} is not waiting for approval (it stopped: {state.stop_reason})."
        )
    waiting = {call.id for call in state.awaiting()}
    for call_id in sorted(approvals.calls | approvals.denied):
        if call_id not in waiting:
            raise NotFoundError(
                f"Agent run {run_id} waits on no call {call_id} "
                f"(it waits on: {', '.join(sorted(waiting))})."
            )
    _audit_approval(context, run_id, approvals)
    state.stop_reason = None
    spec = AgentSpec.model_validate(state.spec)
    return _drive(spec, state, home, context, approvals, model, clock, tracer)


def _audit_approval(context: ToolContext, run_id: str, approvals: Approvals) -> None:
    """An operator's decision lets a tool act: the audit log says who, what and when."""
    workspace = context.workspace
    if workspace is None:
        return
    payload = {
        "calls": sorted(approvals.calls),
        "tools": sorted(approvals.tools),
        "denied": sorted(approvals.denied),
    }
    with workspace.store.session() as session:
        workspace.audit(session, "agent.approve", f"agent-run:{run_id}", payload)


def _drive(
    spec: AgentSpec,
    state: RunState,
    home: Path,
    context: ToolContext,
    approvals: Approvals | None,
    model: ChatModel | None,
    clock: Clock,
    tracer: Tracer | None,
) -> RunState:
    registry = build_registry(spec, context)
    if model is None:
        key = api_key_from_env(spec.model.key_env)
        # one reply may not outlast the run's whole time budget
        timeout_s = min(_REPLY_TIMEOUT_S, spec.budgets.max_time_s)
        model = ChatClient(spec.model.url, spec.model.name, api_key=key, timeout_s=timeout_s)
    try:
        run_loop(
            model,
            registry,
            state,
            spec.budgets,
            model_name=spec.model.name,
            temperature=spec.temperature,
            approvals=approvals,
            clock=clock,
            tracer=tracer,
        )
    finally:
        save_state(home, state)
    return state
