from __future__ import annotations

import polars as pl
import pytest

from forgeml.core.errors import InvalidDataError
from forgeml.data.labelled import LabelledParams, apply


def _params(labels: dict[int, object], column: str = "label") -> LabelledParams:
    return LabelledParams(
        column=column, labels=labels, task="t", annotators=["ann"], resolve="majority"
    )


def test_keeps_labelled_rows_in_order_and_replaces_the_column() -> None:
    frame = pl.DataFrame({"text": ["a", "b", "c"], "label": [None, None, None]})
    out = apply(frame, _params({2: "neg", 0: "pos"})).frame
    assert out.rows() == [("a", "pos"), ("c", "neg")]
    boxes = apply(frame, _params({1: [{"x": 1, "label": "cat"}]}, column="boxes")).frame
    assert boxes["boxes"].to_list() == ['[{"label": "cat", "x": 1}]']


def test_a_label_past_the_rows_is_one_sentence() -> None:
    with pytest.raises(InvalidDataError, match="names row 3, past the 3 rows"):
        apply(pl.DataFrame({"text": ["a", "b", "c"]}), _params({3: "pos"}))
