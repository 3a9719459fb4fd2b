"""Attach labels to the rows they were given for: the version a labelling task exports.

The recipe holds every label with the row position it belongs to, so `data rebuild`
re-derives the version from its parent alone, and its lineage names where the labels came
from (the labelling task, its annotators, how disagreements were settled). Only labelled
rows are kept, in their original order, with the label in `column` (a class as text; a list
of spans or boxes as JSON text); an existing column of that name is replaced.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from forgeml.core.errors import InvalidDataError
from forgeml.data._frame import TransformOutput


class LabelledParams(BaseModel):
    """The recipe of a labelled version."""

    model_config = ConfigDict(extra="forbid")

    column: str = Field("label", min_length=1, description="The column the labels go in.")
    labels: dict[int, Any] = Field(description="Row position -> label.")
    task: str = Field(description="The labelling task the labels come from.")
    annotators: list[str] = Field(description="Who gave the labels.")
    resolve: str = Field(description="How items with several labels were settled.")


def apply(frame: pl.DataFrame, params: LabelledParams) -> TransformOutput:
    """The labelled rows of `frame` with their labels in `params.column`."""
    positions = sorted(params.labels)
    if positions and (positions[0] < 0 or positions[-1] >= frame.height):
        raise InvalidDataError(
            f"A label names row {positions[-1]}, past the {frame.height} rows of the data."
        )
    values = [
        value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        for value in (params.labels[p] for p in positions)
    ]
    rows = frame[positions] if positions else frame.clear()
    labelled = rows.with_columns(pl.Series(params.column, values, dtype=pl.String))
    report = {"rows": labelled.height, "task": params.task, "annotators": params.annotators}
    return TransformOutput(labelled, report)
