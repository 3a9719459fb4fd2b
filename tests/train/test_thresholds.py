"""A served row's sensitive value lands in the group its split's slice cell was learnt under."""

from __future__ import annotations

import polars as pl
import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.train.thresholds import (
    NULL_SLICE,
    GroupRule,
    GroupThresholds,
    RowDecisions,
    ThresholdRule,
    group_label,
)

VALUES = [None, True, False, 0, 37, 2.5, float("nan"), 1e20, "Female", ""]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_value_is_labelled_as_polars_casts_the_splits_slice_cell(value: object) -> None:
    cell = pl.Series("s", [value]).cast(pl.String).fill_null(NULL_SLICE).item()

    assert group_label(value) == cell


def _thresholds(*groups: str) -> GroupThresholds:
    rule = GroupRule(1.0, ThresholdRule(">", 0.5), 0.0, ThresholdRule(">", 0.5))
    return GroupThresholds("s", "demographic_parity", "accuracy_score", dict.fromkeys(groups, rule))


def test_rows_with_a_missing_or_boolean_sensitive_value_are_decided_in_their_groups() -> None:
    thresholds = _thresholds(NULL_SLICE, "true", "false")
    rows = [{"s": None}, {"s": True}, {"s": False}, {}]

    decisions = RowDecisions.of_rows(thresholds, rows)

    assert decisions.groups == [NULL_SLICE, "true", "false", NULL_SLICE]


def test_a_group_never_learnt_is_refused_with_its_label() -> None:
    with pytest.raises(InvalidDataError, match="'__null__', a group the fairness thresholds"):
        RowDecisions.of_rows(_thresholds("Male", "Female"), [{"s": None}])
