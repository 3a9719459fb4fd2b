"""Agent routes: start a run, show it, approve or deny the calls it waits on.

A run is checked and saved before the answer (a spec off its schema, an unknown tool
approved up front, an API key's variable unset: 422 and nothing saved), then driven in the
background: `POST` answers 202 with the run's id, and `GET` shows it as
`forgeml agent show --json` does (`stop_reason` null while it runs). An approval claims
the run first (one approver wins; the other gets 409), is audited as `agent approve` is,
and resumes it in the background.

A run belongs to the request's project (`X-Forgeml-Project`), where `agents:run` is
decided; its tools read that project's datasets, RAG indexes and deployments only (403
`other_project` for another's). `GET` and approve are authorized in the run's own project
(`require(..., resource="agent_run")`), and an approval must act in it too: a member of
both projects acting in another gets 403 `other_project`, as a prompt's alias change does.

The agent comes inline (`spec`) or as a YAML file on the server (`spec_path`); a path is
read only inside the workspace's home (relative to it, symlinks resolved), so the route
cannot be made to read any other file on the server: `..` in any spelling, or a path that
resolves outside the home, is a 400 and nothing is read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from forgeml.agents import (
    Approvals,
    ToolContext,
    WorkspaceAgents,
    claim_run,
    load_spec,
    load_state,
    parse_spec,
    prepare_run,
    run_summary,
    tool_context,
    workspace_agents,
)
from forgeml.agents.background import BackgroundRuns
from forgeml.api._authz import require
from forgeml.api._context import acting
from forgeml.core.errors import ForgemlError, InvalidRequestError
from forgeml.core.workspace import Workspace

router = APIRouter(prefix="/api/v1/agents")


class StartRun(BaseModel):
    """`POST /api/v1/agents/runs`: an agent (a spec file or the spec itself) and a task."""

    model_config = ConfigDict(extra="forbid")

    spec_path: str | None = Field(
        default=None,
        description="Path of the agent's YAML spec inside the workspace's home (relative "
        "to it, or absolute); a path outside it is refused.",
    )
    spec: dict[str, Any] | None = Field(
        default=None, description="The agent's spec itself, as its YAML would parse."
    )
    task: str = Field(min_length=1, description="What to do, in words.")
    approve: list[str] = Field(
        default_factory=list, description="Tools whose every call may run without waiting."
    )


class Decision(BaseModel):
    """`POST /api/v1/agents/runs/{id}/approve`: the held calls to run and to refuse."""

    model_config = ConfigDict(extra="forbid")

    approve: list[str] = Field(default_factory=list, description="Call ids to let run.")
    deny: list[str] = Field(
        default_factory=list, description="Call ids not to run (the model is told)."
    )
    tools: list[str] = Field(
        default_factory=list, description="Tools whose every call may now run."
    )


class SpecPathError(ForgemlError):
    """`spec_path` would read a file outside the workspace's home."""


# percent-escapes are undone this many times over (`%252e` is `%2e` is `.`)
_UNQUOTE_ROUNDS = 3


def spec_file(home: Path, given: str) -> Path:
    """The file `given` names inside `home`: relative to it, or absolute within it.

    Args:
        home: The workspace's home (FORGEML_HOME).
        given: The request's `spec_path`.

    Returns:
        The path, symlinks resolved, inside `home` (it may not exist; reading says so).

    Raises:
        SpecPathError: `given` holds `..` (also percent-encoded or after a backslash) or a
            NUL, or resolves (through symlinks) outside `home`.
    """
    spellings = [given]
    for _ in range(_UNQUOTE_ROUNDS):
        spellings.append(unquote(spellings[-1]))
    for spelling in spellings:
        if "\0" in spelling:
            raise SpecPathError("spec_path holds a NUL character; give a plain file path.")
        if ".." in PurePosixPath(spelling.replace("\\", "/")).parts:
            raise SpecPathError(
                "spec_path may not contain '..'; give a path inside the workspace's home."
            )
    root = home.resolve()
    resolved = (root / given).resolve()  # an absolute `given` replaces `root`
    if not resolved.is_relative_to(root):
        raise SpecPathError(
            "spec_path must name a file inside the workspace's home (symlinks resolved); "
            "send the agent inline as 'spec' instead."
        )
    return resolved


class AgentService:
    """The app's agent runs: the workspace's tools and tracer (made at first use), its pool."""

    def __init__(self, background: BackgroundRuns, make: Callable[[], WorkspaceAgents]) -> None:
        self.background = background
        self._make = make
        self._agents: WorkspaceAgents | None = None
        self._lock = threading.Lock()

    def agents(self) -> WorkspaceAgents:
        with self._lock:
            if self._agents is None:
                self._agents = self._make()
            return self._agents


def _run_context(request: Request) -> ToolContext:
    """The tools' context of a run started or resumed by `request`: the workspace in the
    request's project (where `agents:*` is decided), its RAG indexes opened there too, so a
    run's tools act in its one project from its start to its end (a resume elsewhere is
    refused), and as the caller (an approval is audited as its approver, not as the server's
    own user)."""
    return tool_context(acting(request))


def _service(request: Request) -> AgentService:
    service: AgentService = request.app.state.agents
    return service


def agent_service(workspace: Workspace, max_workers: int = 4) -> AgentService:
    """The agent runs of an app over `workspace`; `close` its `background` at shutdown."""
    background = BackgroundRuns(workspace.settings.home, max_workers=max_workers)
    return AgentService(background, lambda: workspace_agents(workspace))


@router.post("/runs", status_code=202, dependencies=[require("agents:run")])
def start(request: Request, body: StartRun) -> dict[str, Any]:
    """Start a run in the background (202, its id); 422 when the spec or task is refused,
    400 when `spec_path` leads outside the workspace's home."""
    if (body.spec_path is None) == (body.spec is None):
        raise InvalidRequestError("Give the agent as spec_path or as spec, one of the two.")
    service = _service(request)
    agents = service.agents()
    if body.spec_path is not None:
        spec = load_spec(spec_file(agents.home, body.spec_path))
    else:
        spec = parse_spec(body.spec, "spec")
    run = prepare_run(
        spec,
        body.task,
        home=agents.home,
        context=_run_context(request),
        approvals=Approvals(tools=frozenset(body.approve)),
    )
    # the summary is taken before the run is handed over: its thread changes the state
    summary = run_summary(run.state)
    service.background.submit(run, agents.tracer)
    return summary


@router.get("/runs/{run_id}", dependencies=[require("agents:read", resource="agent_run")])
def show(request: Request, run_id: str) -> dict[str, Any]:
    """A run as `forgeml agent show --json` prints it (404 when unknown), to a reader of its
    project."""
    state = load_state(_service(request).background.home, run_id)
    return run_summary(state) | {"messages": state.messages}


@router.post(
    "/runs/{run_id}/approve",
    status_code=202,
    dependencies=[require("agents:approve", resource="agent_run")],
)
def approve(request: Request, run_id: str, body: Decision) -> dict[str, Any]:
    """Let held calls run or refuse them, and resume the run in the background.

    404 for an unknown run; 403 when the request acts in another project than the run's;
    409 when it does not wait (running, stopped, or claimed by a concurrent approval) or a
    call id is not one it waits on; 422 for an empty decision.
    """
    approvals = Approvals(
        tools=frozenset(body.tools), calls=frozenset(body.approve), denied=frozenset(body.deny)
    )
    service = _service(request)
    agents = service.agents()
    run = claim_run(run_id, approvals, home=agents.home, context=_run_context(request))
    # the summary is taken before the run is handed over: its thread changes the state
    summary = run_summary(run.state)
    service.background.submit(run, agents.tracer)
    return summary
