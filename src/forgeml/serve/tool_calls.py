"""Tool calls: the JSON schema that forces one, and the parser of what the model wrote.

With `tool_choice` "required" (or one named function) the reply is decoded under
`calls_schema`: a JSON array of `{"name": <a declared tool>, "arguments": <its parameters>}`
of at most `max_calls` items (1 when parallel calls are off, else the request's or the
server's cap, `DEFAULT_MAX_TOOL_CALLS` by default: a small model under a schema with no
bound may call on until max_tokens cuts it). With "auto" the model writes freely and
`parse_tool_calls` finds `<tool_call>` blocks (the format `forgeml.serve.tool_prompt` asks
for); it also reads the bare array the constrained reply is. Every call is checked: a
declared name, and arguments valid against that tool's parameters (`jsonschema`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forgeml.core.errors import ConfigError, InvalidDataError

__all__ = [
    "DEFAULT_MAX_TOOL_CALLS",
    "MAX_TOOL_CALLS_LIMIT",
    "ParsedCall",
    "calls_schema",
    "new_call_id",
    "parse_tool_calls",
    "text_before_calls",
]

DEFAULT_MAX_TOOL_CALLS = 8  # a server's cap on the calls of one reply unless configured
MAX_TOOL_CALLS_LIMIT = 128  # as many as a request may declare tools
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ParsedCall:
    """One checked call: `call_<hex>` id, the tool's name, the arguments as JSON text."""

    id: str
    name: str
    arguments: str


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    return tool["function"].get("parameters") or _EMPTY_PARAMETERS


def _hoist_definitions(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict]:
    """Each tool's parameters without `$defs`, and all of them merged for the root."""
    merged: dict[str, Any] = {}
    schemas = []
    for tool in tools:
        parameters = dict(_parameters(tool))
        for key in ("$defs", "definitions"):
            for name, definition in (parameters.pop(key, None) or {}).items():
                if merged.get(name, definition) != definition:
                    raise ConfigError(
                        f"Two tools define '{name}' differently; give their definitions "
                        "distinct names."
                    )
                merged[name] = definition
        schemas.append(parameters)
    return schemas, merged


def calls_schema(
    tools: list[dict[str, Any]], name: str | None = None, max_calls: int = DEFAULT_MAX_TOOL_CALLS
) -> dict[str, Any]:
    """The JSON schema of a reply that is tool calls only.

    Args:
        tools: OpenAI tool dicts (`{"type": "function", "function": {...}}`).
        name: The one function to call (a named `tool_choice`), or None for any of them.
        max_calls: The most calls the reply may hold (1: no parallel calls).

    Returns:
        A schema for an array of 1 to `max_calls` `{"name": const, "arguments":
        parameters}` objects, `anyOf` over the tools; the tools' `$defs` are merged at its
        root so their `#/$defs/...` references resolve there.

    Raises:
        ConfigError: `name` is not a declared tool, or two tools' definitions clash.
    """
    chosen = [tool for tool in tools if name is None or tool["function"]["name"] == name]
    if not chosen:
        raise ConfigError(f"tool_choice names the function '{name}', which is not in tools.")
    parameters, definitions = _hoist_definitions(chosen)
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": tool["function"]["name"]}, "arguments": schema},
            "required": ["name", "arguments"],
        }
        for tool, schema in zip(chosen, parameters, strict=True)
    ]
    item = options[0] if len(options) == 1 else {"anyOf": options}
    schema: dict[str, Any] = {"type": "array", "items": item, "minItems": 1, "maxItems": max_calls}
    if definitions:
        schema["$defs"] = definitions
    return schema


def text_before_calls(text: str) -> str:
    """The reply's text before its first `<tool_call>` block, stripped."""
    return text.split("<tool_call>", 1)[0].strip()


def _written_calls(text: str) -> list[Any]:
    """The call objects in `text`: `<tool_call>` blocks, else one bare JSON array/object."""
    blocks = _BLOCK.findall(text)
    sources = blocks if blocks else [text.strip()] if text.strip()[:1] in ("[", "{") else []
    calls: list[Any] = []
    for source in sources:
        try:
            value = json.loads(source)
        except json.JSONDecodeError as error:
            raise InvalidDataError(
                f"The model's tool call is not valid JSON ({error.msg} at character {error.pos})."
            ) from None
        calls.extend(value if isinstance(value, list) else [value])
    return calls


def _checked(call: Any, tools: dict[str, dict[str, Any]], new_id: Callable[[], str]) -> ParsedCall:
    import jsonschema

    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise InvalidDataError("The model's tool call is not an object with a 'name'.")
    name, arguments = call["name"], call.get("arguments", {})
    if name not in tools:
        raise InvalidDataError(f"The model called '{name}', which is not a declared tool.")
    if isinstance(arguments, str):  # some models write the arguments as JSON text
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            raise InvalidDataError(f"The arguments of the call to '{name}' are not JSON.") from None
    schema = _parameters(tools[name])
    error = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(arguments)
    )
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "the top"
        raise InvalidDataError(
            f"The arguments of the call to '{name}' are off its schema at {where}: {error.message}."
        )
    return ParsedCall(new_id(), name, json.dumps(arguments, ensure_ascii=False))


def new_call_id() -> str:
    """A fresh tool call id, `call_` and 24 hex digits."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_tool_calls(
    text: str, tools: list[dict[str, Any]], new_id: Callable[[], str] = new_call_id
) -> list[ParsedCall]:
    """The tool calls in a reply, each checked against its tool; [] when there are none.

    Args:
        text: What the model wrote.
        tools: The OpenAI tool dicts the request declared.
        new_id: Makes each call's id (`call_<hex>` by default; tests pass their own).

    Returns:
        The calls in the order written.

    Raises:
        InvalidDataError: a call is not JSON, names an undeclared tool, or its arguments
            are off that tool's parameters schema (one sentence saying where and why).
    """
    declared = {tool["function"]["name"]: tool for tool in tools}
    return [_checked(call, declared, new_id) for call in _written_calls(text)]
