"""How `prompts eval` scores one output: exact match, contains, regex, JSON validity, or
an LM judge.

Each metric gives 1.0 or 0.0 per row; a version's score is the mean over the rows. The
judge (an option, not a default: a small model judges poorly) asks a language model
whether the output answers as the expected value does, and passes on a reply that
begins with "yes".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from forgeml.prompts.client import ChatModel

METRICS = ("exact", "contains", "regex:PATTERN", "json", "judge")
JUDGE_SYSTEM = (
    "You grade answers. Reply with one word: yes if the answer means the same as the "
    "expected answer, no otherwise."
)


@dataclass(frozen=True)
class Metric:
    """A parsed `--metric`: its name and, for `regex`, the compiled pattern."""

    name: str
    pattern: re.Pattern[str] | None = None

    @property
    def needs_expected(self) -> bool:
        return self.name in ("exact", "contains", "judge")

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
    if name in ("exact", "contains", "json", "judge") and not sep:
        return Metric(name)
    raise UsageError(f"Unknown metric '{text}': use one of {', '.join(METRICS)}.")


def judge(model: ChatModel, output: str, expected: Any) -> tuple[float, str]:
    """The judge's score for `output` against `expected`, and its reply.

    Raises:
        GeneratorError: the judge's endpoint failed.
    """
    messages = [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": f"Expected answer: {expected}\nAnswer: {output}\nSame?"},
    ]
    reply = (model.chat(messages, temperature=0.0, max_tokens=4).content or "").strip()
    return (1.0 if reply.lower().startswith("yes") else 0.0), reply


def _is_json(output: str) -> bool:
    try:
        json.loads(output)
    except ValueError:
        return False
    return True
