"""Agents: typed tools, the function-calling loop, budgets, approval, tracing.

The SDK is three plain functions, each the same as its `forgeml agent` command:

```python
from forgeml import agents

state = agents.run("agent.yaml", "How many rows has adult@v1?")   # or an AgentSpec
if state.stop_reason is agents.StopReason.AWAITING_APPROVAL:
    call = state.awaiting()[0]                                    # id, name, arguments
    state = agents.approve(state.run_id, [call.id])               # or deny=[call.id]
print(agents.show(state.run_id).answer)
```
Each takes `workspace=` (default FORGEML_HOME's) and returns the saved `RunState`;
`run_summary(state)` is the JSON `agent show --json` prints.

Underneath: `make_tool` turns a typed function into a tool (schema from its hints, via
pydantic); `run_loop` drives a `ChatModel` through tool calls to an answer within
`Budgets` (a tool still running when the wall-time budget ends stops the run; the
built-in tools read `tool_time_left()` for their own timeouts), stopping with a
`StopReason`; `start_run` / `resume_run` do it from an `AgentSpec` (YAML) and save each
run under FORGEML_HOME so a call held for approval can be approved later, by one
approver only (`claim_run`), in the run's own project (a run belongs to the project it
started in, FORGEML_PROJECT or the request's, and its tools read that project's only);
`prepare_run` / `claim_run` + `drive` split them for callers that answer before the run
ends (the HTTP API).
"""

from forgeml.agents._calls import Approvals
from forgeml.agents.builtins import BUILTIN_TOOLS, ToolContext
from forgeml.agents.calculator import calculate, calculator_tool
from forgeml.agents.http import HttpGetOptions, check_url, http_get_tool
from forgeml.agents.loop import ToolChoice, run_loop
from forgeml.agents.predict import PredictOptions, predict_tool
from forgeml.agents.rag import RagSearchOptions, Search, rag_search_tool
from forgeml.agents.runner import (
    AgentStoppedError,
    ApprovalRequestError,
    CallNotWaitingError,
    PreparedRun,
    RunNotWaitingError,
    check_decision,
    check_tool_approvals,
    claim_run,
    drive,
    prepare_run,
    resume_run,
    start_run,
)
from forgeml.agents.runs import (
    WorkspaceAgents,
    approve,
    run,
    show,
    tool_context,
    workspace_agents,
)
from forgeml.agents.spec import AgentSpec, Budgets, build_registry, load_spec, parse_spec
from forgeml.agents.sql import SqlQueryOptions, sql_query_tool
from forgeml.agents.state import (
    PendingCall,
    RunState,
    StopReason,
    load_state,
    run_summary,
    save_state,
)
from forgeml.agents.tools import (
    Tool,
    ToolArgumentsError,
    ToolRefusedError,
    ToolRegistry,
    make_tool,
    tool_time_left,
)
from forgeml.agents.trace import NullTracer, Tracer

__all__ = [
    "BUILTIN_TOOLS",
    "AgentSpec",
    "AgentStoppedError",
    "ApprovalRequestError",
    "Approvals",
    "Budgets",
    "CallNotWaitingError",
    "HttpGetOptions",
    "NullTracer",
    "PendingCall",
    "PredictOptions",
    "PreparedRun",
    "RagSearchOptions",
    "RunNotWaitingError",
    "RunState",
    "Search",
    "SqlQueryOptions",
    "StopReason",
    "Tool",
    "ToolArgumentsError",
    "ToolChoice",
    "ToolContext",
    "ToolRefusedError",
    "ToolRegistry",
    "Tracer",
    "WorkspaceAgents",
    "approve",
    "build_registry",
    "calculate",
    "calculator_tool",
    "check_decision",
    "check_tool_approvals",
    "check_url",
    "claim_run",
    "drive",
    "http_get_tool",
    "load_spec",
    "load_state",
    "make_tool",
    "parse_spec",
    "predict_tool",
    "prepare_run",
    "rag_search_tool",
    "resume_run",
    "run",
    "run_loop",
    "run_summary",
    "save_state",
    "show",
    "sql_query_tool",
    "start_run",
    "tool_context",
    "tool_time_left",
    "workspace_agents",
]
