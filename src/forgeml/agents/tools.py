"""Typed tools: a Python function, its JSON schema from its type hints, its arguments checked.

A tool is built from a plain function: pydantic turns the signature into the schema the
model is shown (OpenAI's `tools` entry), the docstring's first line is its description and
its Google-style `Args:` section the description of each parameter. Arguments the model
writes are validated against that same model before the function runs; arguments off the
schema never reach it (`ToolArgumentsError`, one sentence the model is shown instead).
A tool that waits on something (a socket, a query) reads `tool_time_left()`, the run's
remaining wall-time budget, as its own timeout: the loop stops waiting for a tool at the
budget's end, but a Python thread cannot be killed, so the tool has to stop itself.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from forgeml.core.errors import ForgemlError

__all__ = [
    "Tool",
    "ToolArgumentsError",
    "ToolRefusedError",
    "ToolRegistry",
    "make_tool",
    "time_limit",
    "tool_time_left",
]

_ARG_LINE = re.compile(r"^\s{2,}(\w+)(?:\s*\(.*?\))?:\s*(.*)$")
# the names a sandbox escape walks through (smolagents CVE-2025-9959:
# `().__class__.__base__.__subclasses__()`); no tool's data needs them, so any argument
# holding one is refused before the tool sees it, whatever the tool does with text
_ESCAPE_NAMES = re.compile(
    r"__(subclasses|globals|builtins|import|mro|bases?|code|closure|getattribute|reduce(_ex)?)__"
)

# seconds the running tool call may take (the run's budget left when it started)
_time_left: ContextVar[float | None] = ContextVar("forgeml_tool_time_left", default=None)


def tool_time_left() -> float | None:
    """Seconds the current tool call may still take, or None outside a budgeted run.

    The run's remaining wall-time budget when the call started; a tool passes it (or less)
    as the timeout of whatever it waits on.
    """
    return _time_left.get()


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Let the tool calls made inside the block see `seconds` as `tool_time_left()`."""
    token = _time_left.set(seconds)
    try:
        yield
    finally:
        _time_left.reset(token)


class ToolArgumentsError(ForgemlError):
    """The arguments a model wrote for a tool are not JSON, or not on the tool's schema."""

    http_status = 422


class ToolRefusedError(ForgemlError):
    """A tool refused its input: a URL off its allow-list, an expression beyond arithmetic."""

    http_status = 403


@dataclass(frozen=True)
class Tool:
    """One function the model may call, with the schema its arguments must meet."""

    name: str
    description: str
    function: Callable[..., Any]
    arguments: type[BaseModel]
    requires_approval: bool = False

    def schema(self) -> dict[str, Any]:
        """The tool as OpenAI's chat completions `tools` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.arguments.model_json_schema(),
            },
        }

    def validate(self, arguments_json: str) -> dict[str, Any]:
        """The keyword arguments in `arguments_json`, checked against the schema.

        Raises:
            ToolArgumentsError: the text is not a JSON object on the tool's schema.
        """
        try:
            parsed = self.arguments.model_validate_json(arguments_json or "{}")
        except ValidationError as error:
            raise ToolArgumentsError(_describe(self.name, error)) from None
        for text in _strings(parsed.model_dump()):  # decoded, so \u escapes cannot hide one
            escape = _ESCAPE_NAMES.search(text)
            if escape:
                raise ToolArgumentsError(
                    f"The arguments for {self.name} name Python internals ({escape.group(0)}); "
                    "tools take data, not code."
                )
        return {field: getattr(parsed, field) for field in type(parsed).model_fields}


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _describe(name: str, error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "json_invalid":
        return f"The arguments for {name} are not valid JSON; send one JSON object."
    if first["type"] == "extra_forbidden":
        return f"The arguments for {name} are off its schema: '{where}' is not a parameter."
    what = first["msg"].rstrip(".")
    return f"The arguments for {name} are off its schema: {where or 'arguments'}: {what}."


def make_tool(
    function: Callable[..., Any], *, name: str | None = None, requires_approval: bool = False
) -> Tool:
    """A `Tool` from a typed function (every parameter annotated; a docstring).

    Args:
        function: The function; its parameters become the tool's JSON-schema properties.
        name: The name the model calls it by; default the function's own.
        requires_approval: Whether a call waits for an operator's approval before it runs.

    Raises:
        TypeError: a parameter has no annotation, or is *args/**kwargs (a programming error).
    """
    tool_name = name or function.__name__
    hints = get_type_hints(function)
    doc = inspect.getdoc(function) or ""
    described = _arg_descriptions(doc)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"Tool {tool_name} takes *args or **kwargs; name each parameter.")
        if parameter.name not in hints:
            raise TypeError(f"Tool {tool_name}'s parameter {parameter.name} has no type hint.")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (
            hints[parameter.name],
            Field(default, description=described.get(parameter.name)),
        )
    arguments = create_model(
        f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    description = doc.split("\n", 1)[0].strip() if doc else tool_name
    return Tool(tool_name, description, function, arguments, requires_approval)


def _arg_descriptions(doc: str) -> dict[str, str]:
    """`{parameter: description}` from a Google-style docstring's `Args:` section."""
    described: dict[str, str] = {}
    inside, current = False, None
    for line in doc.splitlines():
        if line.strip() == "Args:":
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break  # the next section (Returns:, Raises:)
        match = _ARG_LINE.match(line) if inside else None
        if match and len(line) - len(line.lstrip()) <= 4:
            current = match.group(1)
            described[current] = match.group(2).strip()
        elif inside and current and line.strip():
            described[current] += " " + line.strip()
    return described


class ToolRegistry:
    """The tools one agent may call, by name (an explicit dict, in the order given)."""

    def __init__(self, tools: Sequence[Tool] | Mapping[str, Tool] = ()) -> None:
        """Register `tools` (a list, or a mapping by name).

        Raises:
            ValueError: two tools share a name.
        """
        self._tools: dict[str, Tool] = {}
        for tool in tools.values() if isinstance(tools, Mapping) else tools:
            if tool.name in self._tools:
                raise ValueError(f"Two tools are named {tool.name}.")
            self._tools[tool.name] = tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Every tool's name, in registration order."""
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool as OpenAI's `tools` list."""
        return [tool.schema() for tool in self._tools.values()]
