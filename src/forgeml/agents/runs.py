"""Agent runs in a workspace: what `forgeml agent run|approve|show` and the API call.

`run`, `approve` and `show` are the SDK: plain functions over FORGEML_HOME (or a given
workspace), each the same as its command, returning the run's `RunState`. The built-in
tools are bound to the workspace in its project (FORGEML_PROJECT's datasets, RAG indexes
and deployments), a run belongs to that project, and only that project approves it; every
run is traced into the MLflow store (experiment `forgeml-agents`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.agents._calls import Approvals
from forgeml.agents.builtins import ToolContext
from forgeml.agents.loop import Clock
from forgeml.agents.rag import Search
from forgeml.agents.runner import check_decision, check_tool_approvals, resume_run, start_run
from forgeml.agents.spec import AgentSpec, load_spec
from forgeml.agents.state import RunState, load_state
from forgeml.agents.trace import Tracer
from forgeml.prompts.client import ChatModel

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

__all__ = ["WorkspaceAgents", "approve", "run", "show", "tool_context", "workspace_agents"]


@dataclass(frozen=True)
class WorkspaceAgents:
    """Where a workspace's runs are saved, what its tools reach, where its traces go."""

    home: Path
    context: ToolContext
    tracer: Tracer


def tool_context(workspace: Workspace) -> ToolContext:
    """What the built-in tools of a run in `workspace` reach: its project's datasets, RAG
    indexes and deployments (another project's are refused: `Workspace.check_own`)."""

    def open_index(ref: str) -> Search:
        from forgeml.rag.passages import index_search

        return index_search(workspace, ref)

    return ToolContext(workspace=workspace, open_index=open_index)


def workspace_agents(workspace: Workspace) -> WorkspaceAgents:
    """Tools bound to `workspace` in its project (`tool_context`); traces into its MLflow
    store.

    Raises:
        TrackingUnavailableError: the tracking store cannot be opened.
    """
    from forgeml.tracking.traces import MlflowTracer

    context = tool_context(workspace)
    return WorkspaceAgents(workspace.settings.home, context, MlflowTracer(workspace))


@contextmanager
def _agents(workspace: Workspace | None) -> Iterator[WorkspaceAgents]:
    if workspace is not None:
        yield workspace_agents(workspace)
        return
    from forgeml.core.workspace import open_workspace

    opened = open_workspace()
    try:
        yield workspace_agents(opened)
    finally:
        opened.close()


def run(
    spec: AgentSpec | str | Path,
    task: str,
    *,
    approve_tools: Iterable[str] = (),
    workspace: Workspace | None = None,
    model: ChatModel | None = None,
    clock: Clock = time.monotonic,
) -> RunState:
    """Run an agent on `task` until it answers, waits for approval, or spends a budget.

    Args:
        spec: The agent, or the path of its YAML spec.
        task: What to do, in words.
        approve_tools: Tools whose every call may run without waiting (`--approve`).
        workspace: The workspace; default FORGEML_HOME's, opened and closed here.
        model: The chat model; default an OpenAI client for the spec's endpoint.
        clock: Seconds, monotonic (the wall-time budget runs on it).

    Returns:
        The saved run: `stop_reason` says how it ended; `awaiting()` the calls held.

    Raises:
        ConfigError: the spec is missing or invalid.
        ApprovalRequestError: `approve_tools` names a tool the agent does not have.
    """
    agent = spec if isinstance(spec, AgentSpec) else load_spec(spec)
    approvals = Approvals(tools=frozenset(approve_tools))
    check_tool_approvals(agent, approvals.tools)  # before the workspace and its tracer open
    with _agents(workspace) as agents:
        return start_run(
            agent,
            task,
            home=agents.home,
            context=agents.context,
            approvals=approvals,
            model=model,
            clock=clock,
            tracer=agents.tracer,
        )


def approve(
    run_id: str,
    calls: Iterable[str] = (),
    *,
    deny: Iterable[str] = (),
    tools: Iterable[str] = (),
    workspace: Workspace | None = None,
    model: ChatModel | None = None,
    clock: Clock = time.monotonic,
) -> RunState:
    """Resume a run that waits for approval: `calls` run, `deny` do not (the model is told).

    Args:
        run_id: The waiting run.
        calls: Ids of held calls to let run.
        deny: Ids of held calls to refuse.
        tools: Tools whose every call may now run.
        workspace: The workspace; default FORGEML_HOME's, opened and closed here.
        model: The chat model; default an OpenAI client for the run's endpoint.
        clock: Seconds, monotonic.

    Raises:
        ApprovalRequestError: nothing to approve or deny, or a call both.
        NotFoundError: no such run.
        OtherProjectError: the run belongs to another project than the workspace's.
        RunNotWaitingError: the run is not waiting (running, or stopped).
        CallNotWaitingError: a call id it does not wait on.
    """
    approvals = Approvals(tools=frozenset(tools), calls=frozenset(calls), denied=frozenset(deny))
    check_decision(approvals)  # before the workspace and its tracer open
    with _agents(workspace) as agents:
        return resume_run(
            run_id,
            approvals,
            home=agents.home,
            context=agents.context,
            model=model,
            clock=clock,
            tracer=agents.tracer,
        )


def show(run_id: str, *, home: Path | None = None) -> RunState:
    """The saved run `run_id` (its transcript, stop reason, held calls).

    Args:
        run_id: The run's id.
        home: FORGEML_HOME; default the environment's.

    Raises:
        NotFoundError: no run of that id was saved.
    """
    if home is None:
        from forgeml.core.config import get_settings

        home = get_settings().home
    return load_state(home, run_id)
