"""`${steps.NAME.OUTPUT}` and `${params.NAME}`: finding references and substituting them.

A string that is one reference whole becomes the referenced value itself (a number stays a
number); a reference inside a longer string becomes its text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_REFERENCE = re.compile(r"\$\{([^{}]*)\}")


@dataclass(frozen=True)
class Reference:
    """One `${...}`: `scope` is `steps` or `params`; `output` is empty for params."""

    text: str
    scope: str
    name: str
    output: str = ""


class ReferenceSyntaxError(ValueError):
    """A `${...}` that is neither `${steps.NAME.OUTPUT}` nor `${params.NAME}`."""


def parse(inner: str) -> Reference:
    """The reference `${inner}` names.

    Raises:
        ReferenceSyntaxError: it is not of a known form.
    """
    parts = inner.strip().split(".")
    if parts[0] == "steps" and len(parts) == 3 and all(parts):
        return Reference(f"${{{inner}}}", "steps", parts[1], parts[2])
    if parts[0] == "params" and len(parts) == 2 and parts[1]:
        return Reference(f"${{{inner}}}", "params", parts[1])
    raise ReferenceSyntaxError(
        f"'${{{inner}}}' is not a reference: use ${{steps.NAME.OUTPUT}} or ${{params.NAME}}"
    )


def walk_strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside `value` (dicts and lists), with its dotted key path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from walk_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from walk_strings(item, f"{path}.{index}" if path else str(index))


def references(value: Any) -> Iterator[tuple[str, Reference]]:
    """Every reference inside `value`, with the key path of the string that holds it.

    Raises:
        ReferenceSyntaxError: a `${...}` of no known form (its message names it).
    """
    for path, text in walk_strings(value):
        for match in _REFERENCE.finditer(text):
            try:
                yield path, parse(match.group(1))
            except ReferenceSyntaxError as error:
                raise ReferenceSyntaxError(f"key '{path}': {error}") from None


def substitute(
    value: Any, params: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]
) -> Any:
    """`value` with every reference replaced by its value (references already validated)."""
    if isinstance(value, str):
        return _substitute_text(value, params, outputs)
    if isinstance(value, Mapping):
        return {key: substitute(item, params, outputs) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [substitute(item, params, outputs) for item in value]
    return value


def substitute_params(value: Any, params: Mapping[str, Any]) -> Any:
    """`value` with every `${params.NAME}` replaced; step outputs are left as written (what
    a file holds before its run: see `load.py`)."""
    if isinstance(value, str):
        whole = _REFERENCE.fullmatch(value)
        if whole is not None:
            reference = parse(whole.group(1))
            return params[reference.name] if reference.scope == "params" else value

        def one(match: re.Match[str]) -> str:
            reference = parse(match.group(1))
            return str(params[reference.name]) if reference.scope == "params" else match[0]

        return _REFERENCE.sub(one, value)
    if isinstance(value, Mapping):
        return {key: substitute_params(item, params) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [substitute_params(item, params) for item in value]
    return value


def _lookup(
    reference: Reference, params: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]
) -> Any:
    if reference.scope == "params":
        return params[reference.name]
    return outputs[reference.name][reference.output]


def _substitute_text(
    text: str, params: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]
) -> Any:
    whole = _REFERENCE.fullmatch(text)
    if whole is not None:
        return _lookup(parse(whole.group(1)), params, outputs)
    return _REFERENCE.sub(lambda m: str(_lookup(parse(m.group(1)), params, outputs)), text)
