"""How `prompts eval` scores one output: exact match, contains, regex, JSON validity.

Each metric gives 1.0 or 0.0 per row; a version's score is the mean over the rows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from forgeml.core.errors import UsageError

METRICS = ("exact", "contains", "regex:PATTERN", "json")


@dataclass(frozen=True)
class Metric:
    """A parsed `--metric`: its name and, for `regex`, the compiled pattern."""

    name: str
    pattern: re.Pattern[str] | None = None

    @property
    def needs_expected(self) -> bool:
        return self.name in ("exact", "contains")

    def score(self, output: str, expected: Any = None) -> float:
        """1.0 if `output` passes (against `expected` for exact and contains), else 0.0."""
        if self.name == "exact":
            passed = output.strip() == str(expected).strip()
        elif self.name == "contains":
            passed = str(expected).strip() in output
        elif self.name == "regex" and self.pattern is not None:
            passed = self.pattern.search(output) is not None
        else:
            passed = _is_json(output)
        return 1.0 if passed else 0.0


def parse_metric(text: str) -> Metric:
    """`exact`, `contains`, `regex:PATTERN` or `json`.

    Raises:
        UsageError: an unknown metric, or a pattern that does not compile.
    """
    name, sep, pattern = text.partition(":")
    if name == "regex" and sep:
        try:
            return Metric("regex", re.compile(pattern))
        except re.error as error:
            raise UsageError(
                f"The regex metric's pattern '{pattern}' is invalid: {error}."
            ) from None
    if name in ("exact", "contains", "json") and not sep:
        return Metric(name)
    raise UsageError(f"Unknown metric '{text}': use one of {', '.join(METRICS)}.")


def _is_json(output: str) -> bool:
    try:
        json.loads(output)
    except ValueError:
        return False
    return True
