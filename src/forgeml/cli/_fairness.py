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


def mitigate(
    ref: Annotated[str, typer.Argument(help="The model version to mitigate (NAME@vN, ...).")],
    sensitive: Annotated[
        str, typer.Option("--sensitive", help="The sensitive column (one of its input fields).")
    ],
    constraint: Annotated[
        str, typer.Option(help="demographic_parity or equalized_odds.")
    ] = "demographic_parity",
    objective: Annotated[
        str, typer.Option(help="accuracy_score or balanced_accuracy_score.")
    ] = "accuracy_score",
    fit_split: Annotated[
        str, typer.Option(help="The split the thresholds are fitted on: train or validation.")
    ] = "validation",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Fit group thresholds (fairlearn's ThresholdOptimizer) for a binary classifier and
    register them with it as a new version whose parent is REF."""
    from forgeml.cli._output import print_json, say
    from forgeml.cli._remote import source

    args = (ref, sensitive, constraint, objective, fit_split)
    payload = source(lambda client: client.models.mitigate(*args), lambda: _mitigate_here(*args))
    if as_json:
        print_json(payload)
        return
    say(f"registered {payload['model']} (parent {payload['parent']}), run {payload['run_id']}")
    rows = []
    for split in ("validation", "test"):
        for when in ("before", "after"):
            found = payload["report"][when].get(split)
            if found is not None:
                column = found[sensitive]
                rows.append([split, when, *(_shown(column[m]) for m in ("dp_diff", "eo_diff"))])
    print_table(f"fairness across {sensitive}", ["split", "model", "dp_diff", "eo_diff"], rows)


def _mitigate_here(
    ref: str, sensitive: str, constraint: str, objective: str, fit_split: str
) -> dict[str, Any]:
    from contextlib import closing

    from forgeml.core.workspace import open_workspace
    from forgeml.governance.fairness import MitigateRequest, mitigate, mitigation_summary

    request = MitigateRequest(sensitive, constraint, objective, fit_split)
    with closing(open_workspace()) as workspace:
        return mitigation_summary(mitigate(workspace, ref, request))
