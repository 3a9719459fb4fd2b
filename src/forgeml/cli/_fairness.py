"""How `runs show` and `models show|mitigate` print fairness summaries (see
`forgeml.train.fairness`): one row per split and sensitive column."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forgeml.cli._output import print_table

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
