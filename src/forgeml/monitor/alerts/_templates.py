"""The part of Prometheus' alert templating (Go text/template) rule files use.

Supported: text with actions `{{ $labels.NAME }}`, `{{ $value }}`, `{{ $externalURL }}`,
a pipe into one of Prometheus' humanize functions (`{{ $value | humanizeDuration }}`) or
the call form (`{{ humanizePercentage $value }}`). A template is compiled when its rule
loads; anything else in braces is refused then, naming the action.
The humanize functions follow template/template.go of Prometheus 2.42 (Go's `%.4g`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}", re.DOTALL)
_LABEL = re.compile(r"^\$labels\.([A-Za-z_][A-Za-z0-9_]*)$")
_VARIABLE = re.compile(r"^\$(value|externalURL)$")


class TemplateError(ValueError):
    """A template forgeml cannot expand (the message is one sentence)."""


def go_float(value: float) -> str:
    """A float as Go's `%v` prints it (`130`, `0.25`, `1e+21`, `NaN`, `+Inf`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def _g4(value: float) -> str:
    """Go's `%.4g`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.4g}"


def humanize(value: float) -> str:
    """SI prefixes: 1234 -> "1.234k", 0.001 -> "1m"."""
    if value == 0 or math.isnan(value) or math.isinf(value):
        return _g4(value)
    if abs(value) >= 1:
        prefix = ""
        for next_prefix in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(value) < 1000:
                break
            prefix = next_prefix
            value /= 1000
        return f"{_g4(value)}{prefix}"
    prefix = ""
    for next_prefix in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(value) >= 1:
            break
        prefix = next_prefix
        value *= 1000
    return f"{_g4(value)}{prefix}"


def humanize_1024(value: float) -> str:
    """Binary prefixes: 1024 -> "1ki"."""
    if abs(value) <= 1 or math.isnan(value) or math.isinf(value):
        return _g4(value)
    prefix = ""
    for next_prefix in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(value) < 1024:
            break
        prefix = next_prefix
        value /= 1024
    return f"{_g4(value)}{prefix}"


def humanize_duration(value: float) -> str:
    """Seconds as "45m 0s", "2.485s", "990ms"."""
    if math.isnan(value) or math.isinf(value):
        return _g4(value)
    if value == 0:
        return f"{_g4(value)}s"
    if abs(value) >= 1:
        sign = "-" if value < 0 else ""
        whole = int(abs(value))
        seconds, minutes = whole % 60, (whole // 60) % 60
        hours, days = (whole // 3600) % 24, whole // 86400
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{_g4(abs(value))}s"
    prefix = ""
    for next_prefix in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(value) >= 1:
            break
        prefix = next_prefix
        value *= 1000
    return f"{_g4(value)}{prefix}s"


def humanize_percentage(value: float) -> str:
    """A ratio as a percentage: 0.1 -> "10%"."""
    return f"{_g4(value * 100)}%"


FUNCTIONS: dict[str, Callable[[float], str]] = {
    "humanize": humanize,
    "humanize1024": humanize_1024,
    "humanizeDuration": humanize_duration,
    "humanizePercentage": humanize_percentage,
}


@dataclass(frozen=True)
class _Action:
    operand: str  # "value", "externalURL" or "labels.NAME"
    function: str | None


@dataclass(frozen=True)
class Template:
    """A compiled template: literal text and actions, alternately."""

    parts: tuple[str | _Action, ...]

    def expand(self, labels: Mapping[str, str], value: float, external_url: str = "") -> str:
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            if part.operand.startswith("labels."):
                text = labels.get(part.operand.removeprefix("labels."), "")
                number = _to_float(text) if part.function else 0.0
            elif part.operand == "externalURL":
                text, number = external_url, 0.0
            else:
                text, number = go_float(value), value
            out.append(FUNCTIONS[part.function](number) if part.function else text)
        return "".join(out)


def _to_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def compile_template(text: str) -> Template:
    """Compile `text`.

    Raises:
        TemplateError: an action outside the supported forms.
    """
    parts: list[str | _Action] = []
    position = 0
    for match in _ACTION.finditer(text):
        parts.append(text[position : match.start()])
        parts.append(_action(match.group(1)))
        position = match.end()
    parts.append(text[position:])
    if "{{" in "".join(part for part in parts if isinstance(part, str)):
        raise TemplateError("an action opened with {{ is never closed")
    return Template(tuple(part for part in parts if part != ""))


def _action(source: str) -> _Action:
    words = source.split()
    function = None
    if len(words) == 3 and words[1] == "|":
        operand, function = words[0], words[2]
    elif len(words) == 2 and words[0] in FUNCTIONS:
        function, operand = words
    elif len(words) == 1:
        operand = words[0]
    else:
        raise TemplateError(f"the template action {{{{ {source} }}}} is not supported")
    if function is not None and function not in FUNCTIONS:
        raise TemplateError(
            f"the template function {function} is not supported (only {', '.join(FUNCTIONS)})"
        )
    label = _LABEL.match(operand)
    if label:
        return _Action(f"labels.{label.group(1)}", function)
    variable = _VARIABLE.match(operand)
    if variable:
        return _Action(variable.group(1), function)
    raise TemplateError(f"the template action {{{{ {source} }}}} is not supported")
