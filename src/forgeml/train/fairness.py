"""Group fairness of a binary classifier's predictions, measured by fairlearn.

For each sensitive column (a training config's `data.slices`) fairlearn's `MetricFrame`
gives per-group accuracy, true positive rate (recall), false positive rate and selection
rate; its demographic parity and equalized odds differences and ratios (Hardt et al. 2016)
summarise the gaps between the groups. The positive label is class 1, the second of the
model's class names (as ROC-AUC takes it).

The run keeps the summaries as metrics named `fairness/<column>/<measure>` (`dp_diff`,
`dp_ratio`, `eo_diff`, `eo_ratio`; the test split's with the usual `test_` prefix) and
the per-group table as the artifact `fairness.json`. Multi-class targets have no single
positive label, so they get no fairness metrics (their per-slice accuracy remains).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

FAIRNESS_ARTIFACT = "fairness.json"
PREFIX = "fairness"
# the summaries a run records per sensitive column, and the promotion gate reads
MEASURES = ("dp_diff", "dp_ratio", "eo_diff", "eo_ratio")
GATED = ("dp_diff", "eo_diff")
GROUP_MEASURES = ("accuracy", "tpr", "fpr", "selection_rate", "count")


def metric_name(column: str, measure: str, prefix: str = "") -> str:
    """The metric name of `measure` for sensitive `column`, e.g. `fairness/sex/dp_diff`."""
    return f"{prefix}{PREFIX}/{column}/{measure}"


@dataclass(frozen=True)
class FairnessReport:
    """The summaries (`metrics`) and, per column and group, the group's measures."""

    metrics: dict[str, float]
    groups: dict[str, dict[str, dict[str, float]]]

    def table(self) -> dict[str, Any]:
        """Per column: its groups' measures and its summaries (what fairness.json holds)."""
        return {
            column: {
                "groups": groups,
                **{m: self.metrics.get(metric_name(column, m)) for m in MEASURES},
            }
            for column, groups in self.groups.items()
        }


def fairness_report(
    y_true: np.ndarray, y_pred: np.ndarray, sensitive: Mapping[str, Sequence[str]]
) -> FairnessReport:
    """fairlearn's group metrics of binary predictions, for each sensitive column.

    Args:
        y_true: True labels, 1 for the positive class and 0 otherwise.
        y_pred: Predicted labels, coded the same way.
        sensitive: Column name -> the group of each row (strings, in row order).

    Returns:
        The report; a ratio is left out where it is undefined (every group's rate is 0, as
        when a model predicts no positive at all): NaN is no metric a run, a version's
        record or a gate could compare.
    """
    from fairlearn.metrics import (
        MetricFrame,
        count,
        false_positive_rate,
        selection_rate,
        true_positive_rate,
    )
    from sklearn.metrics import accuracy_score

    y_true, y_pred = np.asarray(y_true).astype(int), np.asarray(y_pred).astype(int)
    measures = {
        "accuracy": accuracy_score,
        "tpr": true_positive_rate,
        "fpr": false_positive_rate,
        "selection_rate": selection_rate,
        "count": count,
    }
    metrics: dict[str, float] = {}
    groups: dict[str, dict[str, dict[str, float]]] = {}
    for column, values in sensitive.items():
        features = np.asarray([str(value) for value in values], dtype=object)
        frame = MetricFrame(
            metrics=measures, y_true=y_true, y_pred=y_pred, sensitive_features=features
        )
        groups[column] = {
            str(group): {name: float(row[name]) for name in GROUP_MEASURES}
            for group, row in frame.by_group.iterrows()
        }
        for measure, value in _summaries(frame).items():
            if math.isfinite(value):
                metrics[metric_name(column, measure)] = value
    return FairnessReport(metrics, groups)


def _summaries(frame: Any) -> dict[str, float]:
    """The four summaries from the column's one MetricFrame, as fairlearn defines them
    (`demographic_parity_*`: the selection rates' gap between groups; `equalized_odds_*`:
    the worse of the TPR and FPR gaps), without the frame each of those functions builds
    anew (they made the report about 3x slower on Adult: benchmarks/fairness.py)."""
    difference, ratio = frame.difference(), frame.ratio()
    return {
        "dp_diff": float(difference["selection_rate"]),
        "dp_ratio": float(ratio["selection_rate"]),
        "eo_diff": float(max(difference["tpr"], difference["fpr"])),
        "eo_ratio": float(min(ratio["tpr"], ratio["fpr"])),
    }


def sensitive_columns(metrics: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The sensitive columns `metrics` hold fairness summaries of, in sorted order."""
    start = f"{prefix}{PREFIX}/"
    found = {
        name[len(start) :].rpartition("/")[0]
        for name in metrics
        if name.startswith(start) and name.rpartition("/")[2] in MEASURES
    }
    return sorted(column for column in found if column)
