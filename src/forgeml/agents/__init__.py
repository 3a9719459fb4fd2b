"""Agents: typed tools, the function-calling loop, budgets, approval, tracing.

`make_tool` turns a typed function into a tool (schema from its hints, via pydantic);
`run_loop` drives a `ChatModel` through tool calls to an answer within `Budgets`, stopping
with a `StopReason`; `start_run` / `resume_run` do it from an `AgentSpec` (YAML) and save
each run under FORGEML_HOME so a call held for approval can be approved later.
"""

from forgeml.agents._calls import Approvals
from forgeml.agents.builtins import BUILTIN_TOOLS, ToolContext
from forgeml.agents.calculator import calculate, calculator_tool
from forgeml.agents.http import HttpGetOptions, check_url, http_get_tool
from forgeml.agents.loop import run_loop
from forgeml.agents.predict import PredictOptions, predict_tool
from forgeml.agents.rag import RagSearchOptions, Search, rag_search_tool
from forgeml.agents.runner import AgentStoppedError, RunNotWaitingError, resume_run, start_run
from forgeml.agents.spec import AgentSpec, Budgets, build_registry, load_spec, parse_spec
from forgeml.agents.sql import SqlQueryOptions, sql_query_tool
from forgeml.agents.state import PendingCall, RunState, StopReason, load_state, save_state
from forgeml.agents.tools import (
    Tool,
    ToolArgumentsError,
    ToolRefusedError,
    ToolRegistry,
    make_tool,
)
from forgeml.agents.trace import NullTracer, Tracer

__all__ = [
    "BUILTIN_TOOLS",
    "AgentSpec",
    "AgentStoppedError",
    "Approvals",
    "Budgets",
    "HttpGetOptions",
    "NullTracer",
    "PendingCall",
    "PredictOptions",
    "RagSearchOptions",
    "RunNotWaitingError",
    "RunState",
    "Search",
    "SqlQueryOptions",
    "StopReason",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolRefusedError",
    "ToolRegistry",
    "Tracer",
    "build_registry",
    "calculate",
    "calculator_tool",
    "check_url",
    "http_get_tool",
    "load_spec",
    "load_state",
    "make_tool",
    "parse_spec",
    "predict_tool",
    "rag_search_tool",
    "resume_run",
    "run_loop",
    "save_state",
    "sql_query_tool",
    "start_run",
]
