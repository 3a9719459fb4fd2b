"""Start an agent run from a spec and a task, or resume one that waits for approval.

Every run is saved under FORGEML_HOME (`state.save_state`) with its spec: first with no
stop reason while it is driven, then however it stops, so `resume_run` needs only its id
and the approvals. A spec's registry `system_prompt` is resolved and rendered once, when
the run starts; the run keeps the version it got (`prompt_ref`, `NAME@vN`) and sends it
with every model call, resumed parts included (an alias moved meanwhile does not change
it). A run belongs to the project of the workspace it starts in (`context.workspace`, else
`default`), and only a workspace acting in that project may resume it: its tools then act
in the same project from its start to its end. Each is two halves, for callers that answer
before the run ends (the API): `prepare_run` / `claim_run` check everything and save the
run as running, raising before anything is saved when the request is wrong; `drive` then
runs the loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgeml.agents._calls import Approvals
from forgeml.agents.builtins import ToolContext
from forgeml.agents.loop import Clock, ToolChoice, run_loop
from forgeml.agents.spec import AgentSpec, build_registry
from forgeml.agents.state import RunState, StopReason, claim_state, save_state
from forgeml.agents.tools import ToolRegistry
from forgeml.agents.trace import Tracer
from forgeml.core.errors import ConfigError, ForgemlError, NotFoundError, UsageError
from forgeml.core.ids import new_id
from forgeml.prompts.client import ChatClient, ChatModel, api_key_from_env

__all__ = [
    "AgentStoppedError",
    "ApprovalRequestError",
    "CallNotWaitingError",
    "PreparedRun",
    "RunNotWaitingError",
    "check_decision",
    "check_tool_approvals",
    "claim_run",
    "drive",
    "prepare_run",
    "resume_run",
    "start_run",
]

_REPLY_TIMEOUT_S = 120.0


class AgentStoppedError(ForgemlError):
    """A run stopped on a budget (steps, time, tokens) or an error before it answered."""


class RunNotWaitingError(ForgemlError):
    """An approval was sent to a run that is not waiting for one."""

    http_status = 409


class CallNotWaitingError(ForgemlError):
    """An approval or denial names a call the run does not wait on."""

    http_status = 409


class ApprovalRequestError(UsageError):
    """An approval names nothing, approves and denies one call, or an unknown tool."""

    http_status = 422


@dataclass
class PreparedRun:
    """A run ready to drive: its spec, its saved state, its tools, model and approvals."""

    spec: AgentSpec
    state: RunState
    registry: ToolRegistry
    model: ChatModel
    approvals: Approvals


def check_decision(approvals: Approvals) -> None:
    """Refuse an approval that names nothing, or approves and denies the same call.

    Raises:
        ApprovalRequestError: what the message says.
    """
    if not (approvals.tools or approvals.calls or approvals.denied):
        raise ApprovalRequestError("Name a call to approve or deny, or a tool to approve.")
    both = sorted(approvals.calls & approvals.denied)
    if both:
        raise ApprovalRequestError(f"Call {both[0]} is both approved and denied; choose one.")


def check_tool_approvals(spec: AgentSpec, tools: Iterable[str]) -> None:
    """Refuse approving up front a tool the agent does not have.

    Raises:
        ApprovalRequestError: one of `tools` is not in the spec.
    """
    names = [entry.name for entry in spec.tools]
    for name in tools:
        if name not in names:
            raise ApprovalRequestError(
                f"Cannot approve {name}: the agent has no such tool "
                f"(tools: {', '.join(names) or 'none'})."
            )


def prepare_run(
    spec: AgentSpec,
    task: str,
    *,
    home: Path,
    context: ToolContext,
    approvals: Approvals | None = None,
    model: ChatModel | None = None,
) -> PreparedRun:
    """A new run of `task`, its tools built and its model reached, saved as running.

    Raises:
        ApprovalRequestError: `approvals` names a tool the agent does not have.
        ConfigError: the spec's `system_prompt` names no prompt version, or its variables
            do not fit the prompt.
        ForgemlError: a tool cannot be built (an unknown RAG index), or the API key's
            variable is unset; nothing is saved then.
    """
    approvals = approvals or Approvals()
    check_tool_approvals(spec, approvals.tools)
    prompt_ref, opening = _opening_messages(spec, task, context)
    registry, model = _tools_and_model(spec, context, model)
    messages = [*opening, {"role": "user", "content": task}]
    state = RunState(
        run_id=new_id(),
        spec=spec.model_dump(mode="json"),
        messages=messages,
        prompt_ref=prompt_ref,
        project=context.workspace.project if context.workspace is not None else "default",
    )
    save_state(home, state)
    return PreparedRun(spec, state, registry, model, approvals)


def claim_run(
    run_id: str,
    approvals: Approvals,
    *,
    home: Path,
    context: ToolContext,
    model: ChatModel | None = None,
) -> PreparedRun:
    """Claim a run that waits for approval: checked, audited and saved as running, at once.

    Of two claims of one run at the same time, in one process or two, one wins; the other
    is refused with `RunNotWaitingError`, so no approved call runs twice. The decision is
    written to the audit log when `context` has a workspace.

    Raises:
        ApprovalRequestError: nothing approved or denied, a call both, or an approved tool
            the agent does not have.
        NotFoundError: no such run.
        OtherProjectError: `context`'s workspace acts in another project than the run's.
        RunNotWaitingError: the run is not waiting for approval (it is running or stopped).
        CallNotWaitingError: an approved or denied call id it does not wait on.
    """
    check_decision(approvals)
    parts: list[tuple[AgentSpec, ToolRegistry, ChatModel]] = []

    def check(state: RunState) -> None:
        if context.workspace is not None:
            # its tools would otherwise read this project's datasets and indexes mid-run
            context.workspace.check_own("Agent run", run_id, state.project)
        if state.stop_reason is not StopReason.AWAITING_APPROVAL:
            how = f"it stopped: {state.stop_reason}" if state.stop_reason else "it is running"
            raise RunNotWaitingError(f"Agent run {run_id} is not waiting for approval ({how}).")
        waiting = {call.id for call in state.awaiting()}
        for call_id in sorted(approvals.calls | approvals.denied):
            if call_id not in waiting:
                raise CallNotWaitingError(
                    f"Agent run {run_id} waits on no call {call_id} "
                    f"(it waits on: {', '.join(sorted(waiting))})."
                )
        spec = AgentSpec.model_validate(state.spec)
        check_tool_approvals(spec, approvals.tools)
        parts.append((spec, *_tools_and_model(spec, context, model)))
        _audit_approval(context, run_id, approvals)

    state = claim_state(home, run_id, check)
    spec, registry, chat_model = parts[0]
    return PreparedRun(spec, state, registry, chat_model, approvals)


def drive(
    run: PreparedRun, *, home: Path, clock: Clock = time.monotonic, tracer: Tracer | None = None
) -> RunState:
    """Run the loop on a prepared or claimed run; it is saved however it stops.

    A failure the loop does not turn into a stop reason (the trace store going away, a bug)
    is raised, and the run is saved stopped with it as its error, not left as running.
    """
    spec = run.spec
    try:
        run_loop(
            run.model,
            run.registry,
            run.state,
            run.spec.budgets,
            model_name=run.spec.model.name,
            temperature=run.spec.temperature,
            approvals=run.approvals,
            clock=clock,
            tracer=tracer,
            choice=ToolChoice(spec.tool_choice, spec.parallel_tool_calls, spec.seed),
        )
    except Exception as error:
        run.state.stop_reason = StopReason.ERROR
        run.state.error = (
            str(error)
            if isinstance(error, ForgemlError)
            else f"The run failed ({type(error).__name__}: {error})."
        )
        raise
    finally:
        save_state(home, run.state)
    return run.state


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

    Raises:
        See `prepare_run`.
    """
    run = prepare_run(spec, task, home=home, context=context, approvals=approvals, model=model)
    return drive(run, home=home, clock=clock, tracer=tracer)


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

    Raises:
        See `claim_run`.
    """
    run = claim_run(run_id, approvals, home=home, context=context, model=model)
    return drive(run, home=home, clock=clock, tracer=tracer)


def _opening_messages(
    spec: AgentSpec, task: str, context: ToolContext
) -> tuple[str | None, list[dict[str, Any]]]:
    """The version the system prompt resolved to (None: the spec's `system`), and the
    messages that go before the task."""
    if spec.system_prompt is None:
        return None, [{"role": "system", "content": spec.system}]
    if context.workspace is None:
        raise ConfigError(
            "system_prompt needs a workspace (FORGEML_HOME) to read the prompt registry from."
        )
    from forgeml.prompts.registry import get_prompt

    try:
        version = get_prompt(context.workspace, spec.system_prompt)
    except (NotFoundError, UsageError) as error:
        # the spec is what is wrong, not the run the request asked for
        raise ConfigError(f"Cannot use system_prompt {spec.system_prompt}: {error}") from None
    values = dict(spec.system_variables)
    if any(variable.name == "task" for variable in version.spec.variables):
        values["task"] = task
    rendered = version.checked().render(values, version.ref)
    if isinstance(rendered, str):
        return version.ref, [{"role": "system", "content": rendered}]
    return version.ref, list(rendered)


def _tools_and_model(
    spec: AgentSpec, context: ToolContext, model: ChatModel | None
) -> tuple[ToolRegistry, ChatModel]:
    registry = build_registry(spec, context)
    if model is None:
        key = api_key_from_env(spec.model.key_env)
        # one reply may not outlast the run's whole time budget
        timeout_s = min(_REPLY_TIMEOUT_S, spec.budgets.max_time_s)
        model = ChatClient(spec.model.url, spec.model.name, api_key=key, timeout_s=timeout_s)
    return registry, model


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
