"""The fairness gate: a model version may take an alias only within fairness bounds.

`models promote --max-dp-diff X --max-eo-diff Y` (and the API's promote body) and a
monitoring policy's gate (its pipeline's gate step) ask the same question of the same
record, through `fairness_check`: does any sensitive column's demographic parity or
equalized odds difference (the metrics `forgeml.train.fairness` records, on the
validation split) exceed its bound? A version without fairness metrics is rejected: its
run named no slices, so nothing says it is fair.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forgeml.core.errors import UsageError


@dataclass(frozen=True)
class FairnessBounds:
    """The largest demographic parity and equalized odds differences allowed (None: any)."""

    max_dp_diff: float | None = None
    max_eo_diff: float | None = None

    def __post_init__(self) -> None:
        for flag, bound in (
            ("--max-dp-diff", self.max_dp_diff),
            ("--max-eo-diff", self.max_eo_diff),
        ):
            if bound is not None and not (math.isfinite(bound) and 0 <= bound <= 1):
                raise UsageError(f"{flag} must be a number between 0 and 1, not {bound}.")

    @property
    def active(self) -> bool:
        return self.max_dp_diff is not None or self.max_eo_diff is not None

    def measures(self) -> dict[str, float]:
        """The gated measure (`dp_diff`, `eo_diff`) -> its bound, for the bounds given."""
        found = {"dp_diff": self.max_dp_diff, "eo_diff": self.max_eo_diff}
        return {measure: bound for measure, bound in found.items() if bound is not None}


@dataclass(frozen=True)
class FairnessVerdict:
    """What the gate found: the bounds, each column's gated values, and why it failed."""

    bounds: FairnessBounds
    values: dict[str, dict[str, float | None]]
    rejection: str | None

    @property
    def passed(self) -> bool:
        return self.rejection is None

    def as_dict(self) -> dict[str, Any]:
        """The verdict as audited with the promotion (and shown by a gate step)."""
        return {
            "max_dp_diff": self.bounds.max_dp_diff,
            "max_eo_diff": self.bounds.max_eo_diff,
            "values": self.values,
            "passed": self.passed,
            "reason": self.rejection,
        }


def fairness_check(ref: str, metrics: Mapping[str, Any], bounds: FairnessBounds) -> FairnessVerdict:
    """Whether the version `ref` with `metrics` keeps within `bounds`.

    Args:
        ref: the version, for the sentence (`NAME@vN`).
        metrics: its recorded metrics (`fairness/<column>/dp_diff` and the like).
        bounds: the largest differences allowed.

    Returns:
        The verdict; `rejection` is one sentence when it fails.
    """
    from forgeml.train.fairness import metric_name, sensitive_columns

    columns = sensitive_columns(metrics)
    values = {
        column: {m: _number(metrics.get(metric_name(column, m))) for m in bounds.measures()}
        for column in columns
    }
    if not columns:
        return FairnessVerdict(
            bounds,
            values,
            f"Model {ref} has no fairness metrics: its training run names no slices "
            "(data.slices), so the fairness bounds cannot be checked.",
        )
    for column in columns:
        for measure, bound in bounds.measures().items():
            value = values[column][measure]
            if value is None:
                return FairnessVerdict(
                    bounds, values, f"Model {ref} records no {measure} across {column}."
                )
            if value > bound:
                return FairnessVerdict(
                    bounds,
                    values,
                    f"Model {ref} breaks a fairness bound: its {measure} across {column} is "
                    f"{value:.4f}, above the {bound:g} allowed.",
                )
    return FairnessVerdict(bounds, values, None)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
