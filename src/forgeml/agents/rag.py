"""The `rag_search` tool: passages from a knowledge base, returned as data.

The index itself is `forgeml.rag`'s; this tool takes any `Search` callable (query and k
to passages), so the agent loop does not depend on how the index is built. What it
returns is text to read, never instructions: the loop treats a passage that says "call
this tool" like any other tool result, and approval still stands between the model and
a tool that needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forgeml.agents.tools import Tool, make_tool

__all__ = ["RagSearchOptions", "Search", "rag_search_tool"]

# query, k -> passages (each a JSON-able dict: id, text, source, score ...)
Search = Callable[[str, int], list[dict[str, Any]]]


class RagSearchOptions(BaseModel):
    """Which index `rag_search` reads and how many passages it returns."""

    model_config = ConfigDict(extra="forbid")

    index: str = Field(min_length=1, description="The RAG index's name.")
    k: int = Field(default=5, gt=0, le=50, description="Passages returned at most.")


def rag_search_tool(search: Search, k: int = 5, requires_approval: bool = False) -> Tool:
    """The `rag_search` tool over `search`."""

    def rag_search(query: str) -> list[dict[str, Any]]:
        """Search the knowledge base; returns the passages that best match the query.

        Args:
            query: What to look for, in words.
        """
        return search(query, k)

    return make_tool(rag_search, requires_approval=requires_approval)
