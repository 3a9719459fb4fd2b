"""How `runs show` and `models show|mitigate` print fairness summaries (see
`forgeml.train.fairness`): one row per split and sensitive column."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_table

MaxDpDiff = Annotated[
    float | None,
    typer.Option(
        "--max-dp-diff",
        help="Reject a version whose demographic parity difference across any sensitive "
        "column is above this (0-1).",
    ),
]
MaxEoDiff = Annotated[
    float | None,
    typer.Option(
        "--max-eo-diff",
        help="Reject a version whose equalized odds difference across any sensitive column "
        "is above this (0-1).",
    ),
]

_SPLITS = (("", "validation"), ("test_", "test"))


def fairness_rows(metrics: Mapping[str, Any]) -> list[list[str]]:
    """[split, column, dp_diff, dp_ratio, eo_diff, eo_ratio] per split and column."""
    from forgeml.train.fairness import MEASURES, metric_name, sensitive_columns

    rows = []
    for prefix, split in _SPLITS:
        for column in sensitive_columns(metrics, prefix):
            values = [metrics.get(metric_name(column, m, prefix)) for m in MEASURES]
            rows.append([split, column, *(_shown(v) for v in values)])
    return rows


def print_fairness(metrics: Mapping[str, Any]) -> None:
    """The fairness table, when `metrics` hold fairness summaries."""
    from forgeml.train.fairness import MEASURES

    rows = fairness_rows(metrics)
    if rows:
        print_table("fairness", ["split", "column", *MEASURES], rows)


def _shown(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.4f}"
    return "-"  # a ratio of two zero rates (stored as null)


def fairness_bounds(max_dp_diff: float | None, max_eo_diff: float | None) -> dict[str, float]:
    """The bounds given, checked (UsageError when outside 0-1), as promote's keywords."""
    from forgeml.tracking.fairness import FairnessBounds

    FairnessBounds(max_dp_diff, max_eo_diff)  # one sentence for a bound outside 0-1
    found = {"max_dp_diff": max_dp_diff, "max_eo_diff": max_eo_diff}
    return {name: bound for name, bound in found.items() if bound is not None}
