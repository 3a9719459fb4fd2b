"""Alert rule files in Prometheus' format, loaded for forgeml's embedded evaluation.

The shipped `forgeml-rules.yml` always loads; a user adds files of their own
(`forgeml server --alert-rules FILE`). Each file is validated with pydantic and every
expression and template is compiled at load time, so a bad rule stops the load with one
sentence naming the file, the rule and what is wrong, never a later evaluation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forgeml.core.errors import ConfigError
from forgeml.monitor.alerts._promql import Node, PromQLError, compile_expr, longest_range
from forgeml.monitor.alerts._templates import Template, TemplateError, compile_template
from forgeml.monitor.assets import RULES_FILE, rules_text

_DURATION = re.compile(
    r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$"
)
_UNITS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)


def parse_duration(text: str) -> float:
    """A Prometheus duration ("5m", "1h30m", "0s") in seconds.

    Raises:
        ValueError: not a duration.
    """
    match = _DURATION.match(text)
    if text in ("", "0") or not match or not any(match.groups()):
        if text == "0":
            return 0.0
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m or 1h")
    return sum(int(part) * unit for part, unit in zip(match.groups(), _UNITS, strict=True) if part)


class RuleSpec(BaseModel):
    """One alerting rule as Prometheus writes it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    alert: str = Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    expr: str = Field(min_length=1)
    hold: str = Field("0s", alias="for")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("hold")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value


class GroupSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    interval: str | None = None
    rules: list[RuleSpec]

    @field_validator("rules", mode="before")
    @classmethod
    def _alerting_only(cls, value: Any) -> Any:
        for rule in value if isinstance(value, list) else ():
            if isinstance(rule, dict) and "record" in rule:
                raise ValueError(
                    f"recording rule {rule['record']!r} is not supported (alerting rules only)"
                )
        return value


class RuleFileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    groups: list[GroupSpec]


@dataclass(frozen=True)
class AlertRule:
    """A compiled alerting rule."""

    name: str
    group: str
    file: str
    expr: str
    node: Node
    hold_s: float
    labels: dict[str, Template]
    annotations: dict[str, Template]

    @property
    def range_s(self) -> float:
        """The longest window the expression reads: how long a fresh sample store needs
        before the rule's silence means the alert is over."""
        return longest_range(self.node)


def load_rules(files: Iterable[Path] = (), *, shipped: bool = True) -> list[AlertRule]:
    """The shipped rules (unless `shipped` is False) and those of `files`, compiled.

    Raises:
        ConfigError: a file that cannot be read or parsed, a rule that fails validation,
            an expression or template forgeml cannot evaluate (one sentence naming the
            file and rule).
    """
    rules: list[AlertRule] = []
    if shipped:
        rules += parse_rules(rules_text(), RULES_FILE)
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"Cannot read the rule file {path}: {error.strerror}.") from None
        rules += parse_rules(text, str(path))
    return rules


def parse_rules(text: str, file: str) -> list[AlertRule]:
    """The rules of one file's `text` (`file` names it in errors)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{file} is not valid YAML: {_first_line(str(error))}.") from None
    try:
        spec = RuleFileSpec.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise ConfigError(f"{file}: {where}: {first['msg']}.") from None
    rules = []
    for group in spec.groups:
        for rule in group.rules:
            rules.append(_compile_rule(rule, group.name, file))
    return rules


def _compile_rule(rule: RuleSpec, group: str, file: str) -> AlertRule:
    try:
        node = compile_expr(rule.expr)
    except PromQLError as error:
        raise ConfigError(
            f"{file}: rule {rule.alert} (group {group}) has a bad expression: {error}."
        ) from None
    try:
        labels = {key: compile_template(value) for key, value in rule.labels.items()}
        annotations = {key: compile_template(value) for key, value in rule.annotations.items()}
    except TemplateError as error:
        raise ConfigError(
            f"{file}: rule {rule.alert} (group {group}) has a bad template: {error}."
        ) from None
    return AlertRule(
        rule.alert, group, file, rule.expr, node, parse_duration(rule.hold), labels, annotations
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].rstrip(":.")
