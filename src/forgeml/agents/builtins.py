"""The built-in tools an agent spec names, each with its options model (an explicit registry).

`BUILTIN_TOOLS` maps a name to the pydantic model of its options and a builder; a spec's
`tools:` entry is checked against the options model where the spec is loaded, so a typo
is a sentence naming the key, not a failure mid-run. There is no code-execution tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from forgeml.agents.calculator import calculator_tool
from forgeml.agents.http import HttpGetOptions, http_get_tool
from forgeml.agents.predict import PredictOptions, check_deployment_project, predict_tool
from forgeml.agents.rag import RagSearchOptions, Search, rag_search_tool
from forgeml.agents.sql import SqlQueryOptions, sql_query_tool
from forgeml.agents.tools import Tool
from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

__all__ = ["BUILTIN_TOOLS", "BuiltinTool", "ToolContext", "build_tool"]


@dataclass(frozen=True)
class ToolContext:
    """What built-in tools may need from their surroundings."""

    workspace: Workspace | None = None
    open_index: Callable[[str], Search] | None = None


class NoOptions(BaseModel):
    """A tool that takes no options."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class BuiltinTool:
    """A built-in tool: its options model and how to build it."""

    options: type[BaseModel]
    build: Callable[[Any, ToolContext, bool], Tool]


def _calculator(_: NoOptions, __: ToolContext, approval: bool) -> Tool:
    return calculator_tool(approval)


def _http_get(options: HttpGetOptions, _: ToolContext, approval: bool) -> Tool:
    return http_get_tool(options, approval)


def _predict(options: PredictOptions, context: ToolContext, approval: bool) -> Tool:
    if context.workspace is not None:
        check_deployment_project(context.workspace, options.model)
    return predict_tool(options, approval)


def _sql_query(options: SqlQueryOptions, context: ToolContext, approval: bool) -> Tool:
    if context.workspace is None:
        raise ConfigError("sql_query needs a workspace (FORGEML_HOME) to read datasets from.")
    return sql_query_tool(context.workspace, options, approval)


def _rag_search(options: RagSearchOptions, context: ToolContext, approval: bool) -> Tool:
    if context.open_index is None:
        raise ConfigError("rag_search needs a RAG index, and none can be opened here yet.")
    return rag_search_tool(context.open_index(options.index), options.k, approval)


BUILTIN_TOOLS: dict[str, BuiltinTool] = {
    "calculator": BuiltinTool(NoOptions, _calculator),
    "http_get": BuiltinTool(HttpGetOptions, _http_get),
    "predict": BuiltinTool(PredictOptions, _predict),
    "rag_search": BuiltinTool(RagSearchOptions, _rag_search),
    "sql_query": BuiltinTool(SqlQueryOptions, _sql_query),
}


def build_tool(name: str, options: BaseModel, context: ToolContext, approval: bool) -> Tool:
    """The built-in tool `name` with its (already validated) options."""
    return BUILTIN_TOOLS[name].build(options, context, approval)
