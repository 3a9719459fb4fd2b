"""The `sql_query` tool: read-only SQL over the store's dataset versions.

It is `forgeml data query`'s guard itself (`forgeml.data.query.run_query`): one SELECT,
DuckDB's file access switched off and locked, only the named datasets handed in. So a
model-written query, unlike LlamaIndex's PandasQueryEngine (CVE-2023-39662), can neither
write, nor read a file outside the store, nor run code. A query still running when the
run's time is up is interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from forgeml.agents.tools import Tool, make_tool, tool_time_left

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

__all__ = ["SqlQueryOptions", "sql_query_tool"]


class SqlQueryOptions(BaseModel):
    """How many rows one `sql_query` call returns."""

    model_config = ConfigDict(extra="forbid")

    max_rows: int = Field(default=50, gt=0, le=10_000, description="Rows returned at most.")


def sql_query_tool(
    workspace: Workspace, options: SqlQueryOptions, requires_approval: bool = False
) -> Tool:
    """The `sql_query` tool over `workspace`'s datasets."""
    from forgeml.data.query import run_query

    def sql_query(sql: str) -> dict[str, Any]:
        """Run one read-only SQL SELECT over the datasets (each dataset is a table by name).

        Args:
            sql: One SELECT statement, e.g. 'SELECT count(*) FROM "adult@v1"'.
        """
        # interrupted when the run's time is up, not left running behind it
        table = run_query(workspace, sql, limit=options.max_rows + 1, timeout_s=tool_time_left())
        rows = table.slice(0, options.max_rows).to_pylist()
        return {
            "columns": table.column_names,
            "rows": rows,
            "truncated": table.num_rows > options.max_rows,
        }

    return make_tool(sql_query, requires_approval=requires_approval)
