"""Declared prompt variables, and the values a render binds to them.

Values from a command line arrive as text (`--var k=v`) and are read by the declared
type; values from a file or the SDK must already have it. An unknown or missing
variable, or a value of the wrong type, is one sentence naming the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forgeml.core.errors import InvalidDataError

VariableType = Literal["string", "integer", "number", "boolean", "list", "object"]
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "list": (list,),
    "object": (dict,),
}
_TRUE, _FALSE = {"true", "yes", "1"}, {"false", "no", "0"}
_A = {name: ("an " if name[0] in "aeiou" else "a ") + name for name in _PYTHON_TYPES}


class Variable(BaseModel):
    """One variable a prompt declares."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$", description="Its name.")
    type: VariableType = Field(default="string", description="Its JSON type.")
    required: bool = Field(default=True, description="A render must give it (or a default).")
    default: Any = Field(default=None, description="Its value when a render leaves it out.")
    description: str = Field(default="", description="What it is for.")


def bind(
    declared: list[Variable], values: Mapping[str, Any], prompt: str, *, as_text: bool = False
) -> dict[str, Any]:
    """`values` checked against `declared`, with defaults filled in.

    Args:
        declared: The prompt's variables.
        values: The render's values.
        prompt: The prompt's reference, for errors.
        as_text: The values are command-line text, to be read by each declared type.

    Raises:
        InvalidDataError: an unknown or missing variable, or a value of the wrong type.
    """
    by_name = {variable.name: variable for variable in declared}
    for name in values:
        if name not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise InvalidDataError(
                f"Prompt {prompt} has no variable '{name}' (it declares: {known})."
            )
    bound: dict[str, Any] = {}
    for variable in declared:
        if variable.name in values:
            value = values[variable.name]
            bound[variable.name] = _read(variable, value, prompt) if as_text else value
        elif variable.default is not None or not variable.required:
            bound[variable.name] = variable.default
        else:
            raise InvalidDataError(f"Prompt {prompt} needs the variable '{variable.name}'.")
        check_type(variable, bound[variable.name], prompt)
    return bound


def check_type(variable: Variable, value: Any, prompt: str) -> None:
    """Raise `InvalidDataError` unless `value` has `variable`'s declared type (or is None)."""
    if value is None and not variable.required:
        return
    expected = _PYTHON_TYPES[variable.type]
    wrong_bool = isinstance(value, bool) and variable.type in ("integer", "number")
    if not isinstance(value, expected) or wrong_bool:
        raise InvalidDataError(
            f"Prompt {prompt}'s variable '{variable.name}' must be {_A[variable.type]}, "
            f"not {type(value).__name__} {value!r:.60}."
        )


def _read(variable: Variable, text: Any, prompt: str) -> Any:
    if not isinstance(text, str) or variable.type == "string":
        return text
    try:
        if variable.type == "integer":
            return int(text)
        if variable.type == "number":
            return float(text)
        if variable.type == "boolean" and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        if variable.type in ("list", "object"):
            return json.loads(text)
    except ValueError:
        pass
    raise InvalidDataError(
        f"Prompt {prompt}'s variable '{variable.name}' must be {_A[variable.type]}, "
        f"not {text!r:.60}."
    )
