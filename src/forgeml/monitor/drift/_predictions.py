"""Prediction drift: the model's outputs in a window against its outputs on validation data.

Outputs become a frame of at most two columns, the same way on both sides: a classifier's
`label` (categorical) and `confidence` (the largest class probability, numeric); a
regressor's `prediction` (numeric). The reference side runs the model version on its
dataset's validation split once, when the reference is built; the live side reads the
`outputs` the request log kept beside each request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from forgeml.serve.model import LoadedModel

LABEL, CONFIDENCE, PREDICTION = "label", "confidence", "prediction"
_BATCH = 256


def _as_columns(outputs: Any) -> dict[str, list[Any]] | None:
    """Row-form outputs (`:predict`: one dict or number per row) or columnar ones (v2)."""
    if isinstance(outputs, dict):
        return {name: list(values) for name, values in outputs.items() if isinstance(values, list)}
    if not isinstance(outputs, list) or not outputs:
        return None
    if all(isinstance(item, int | float) and not isinstance(item, bool) for item in outputs):
        return {PREDICTION: outputs}
    if all(isinstance(item, dict) for item in outputs):
        names = set(outputs[0])
        return {name: [item.get(name) for item in outputs] for name in names}
    return None


def _confidence(probabilities: list[Any]) -> list[float | None]:
    found: list[float | None] = []
    for row in probabilities:
        values = list(row.values()) if isinstance(row, dict) else row
        numbers = [v for v in values or [] if isinstance(v, int | float)]
        found.append(float(max(numbers)) if numbers else None)
    return found


def output_frame(outputs: Any, rows: int) -> pl.DataFrame | None:
    """`outputs` of `rows` rows as `label`/`confidence` or `prediction` columns, else None.

    None when the outputs hold neither a label nor a numeric prediction for every row (a
    language model's text, an embedding, a field the log redacted).
    """
    columns = _as_columns(outputs)
    if columns is None or rows == 0:  # e.g. a chat request: its messages are no rows
        return None
    found: dict[str, list[Any]] = {}
    if len(columns.get(LABEL, [])) == rows:
        found[LABEL] = [None if value is None else str(value) for value in columns[LABEL]]
        if len(columns.get("probabilities", [])) == rows:
            found[CONFIDENCE] = _confidence(columns["probabilities"])
    elif len(columns.get(PREDICTION, [])) == rows:
        values = columns[PREDICTION]
        if all(isinstance(v, int | float) or v is None for v in values):
            found[PREDICTION] = [None if v is None else float(v) for v in values]
    if not found:
        return None
    schema = {LABEL: pl.String, CONFIDENCE: pl.Float64, PREDICTION: pl.Float64}
    return pl.DataFrame(found, schema={name: schema[name] for name in found})


def model_outputs(model: LoadedModel, rows: list[Any]) -> pl.DataFrame | None:
    """What `model` answers for `rows` (in batches), as `output_frame` columns."""
    answers = {field.name for field in model.outputs}
    wanted = {LABEL, "probabilities"} & answers or {PREDICTION} & answers
    if not wanted or not rows:
        return None
    parts: list[dict[str, np.ndarray]] = [
        model.run_rows(rows[start : start + _BATCH], set(wanted))
        for start in range(0, len(rows), _BATCH)
    ]
    columns = {name: np.concatenate([part[name] for part in parts]).tolist() for name in wanted}
    return output_frame(columns, len(rows))
