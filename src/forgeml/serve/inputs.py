"""Raw request rows -> model input arrays, with the checks that make a bad request a 422.

Tabular rows are dicts of raw fields and go through the model's own fitted FeatureSpec
(`forgeml.data.features.record_encoder`: the matrix `feature_matrix` makes of
`transform_records`, computed without polars where that is exact), the path training
took, so serving cannot skew. Text rows are strings,
tokenised with the model's tokenizer params. `check` runs per request on the event loop
(cheap type checks, so one bad request fails alone); `encode` runs per batch in the
batcher's worker thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from forgeml.core.errors import InvalidDataError
from forgeml.data.features import FeatureSpec, record_encoder

# A fast tokenizer must not run in two threads at once (see `load_tokenizer`); two text
# models in one server share the cached one, so their batcher threads take turns.
_TOKENIZER_LOCK = threading.Lock()


@dataclass(frozen=True)
class InputField:
    """One raw input field and its KServe v2 datatype (BYTES, INT64, FP32, FP64, BOOL)."""

    name: str
    datatype: str


class RowEncoder(Protocol):
    """Validates and encodes the raw rows one model takes."""

    fields: list[InputField]

    def check(self, rows: list[Any]) -> None:
        """Raise InvalidDataError (one sentence) if a row is not one the model takes."""
        ...

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """Arrays named as the runtime's inputs, one row each."""
        ...


def v2_datatype(dtype: Any) -> str:
    """The KServe v2 datatype a raw column of polars `dtype` is sent as."""
    if dtype.is_integer():
        return "INT64"
    if dtype.is_float():
        return "FP32" if str(dtype) == "Float32" else "FP64"
    if str(dtype) == "Boolean":
        return "BOOL"
    return "BYTES"


def _fits(value: Any, datatype: str) -> bool:
    if value is None:
        return True  # nulls are encoded as training encoded them
    if datatype == "BYTES":
        return isinstance(value, str)
    if datatype == "BOOL":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if datatype == "INT64":
        return isinstance(value, int)
    return isinstance(value, int | float)


_TYPE_WORDS = {
    "BYTES": "a string",
    "BOOL": "true or false",
    "INT64": "an integer",
    "FP32": "a number",
    "FP64": "a number",
}


class TabularEncoder:
    """Records (dicts of raw fields) -> `features` float32 [N, F] through the FeatureSpec."""

    def __init__(self, spec: FeatureSpec) -> None:
        self.spec = spec
        self.fields = [
            InputField(name, v2_datatype(spec.input_schema[name])) for name in spec.input_columns
        ]
        self._types = {field.name: field.datatype for field in self.fields}
        self._records = record_encoder(spec)

    def check(self, rows: list[Any]) -> None:
        """Every row is a dict with exactly the spec's input fields, each of its type."""
        expected = ", ".join(self._types)
        for position, row in enumerate(rows):
            if not isinstance(row, dict):
                raise InvalidDataError(
                    f"Instance {position} is {type(row).__name__}, not an object of raw fields "
                    f"({expected})."
                )
            extra = [name for name in row if name not in self._types]
            if extra:
                raise InvalidDataError(
                    f"Instance {position} has field '{extra[0]}', which the model does not "
                    f"take (fields: {expected})."
                )
            missing = [name for name in self._types if name not in row]
            if missing:
                raise InvalidDataError(
                    f"Instance {position} has no field '{missing[0]}', which the model needs "
                    f"(fields: {expected})."
                )
            for name, datatype in self._types.items():
                if not _fits(row[name], datatype):
                    raise InvalidDataError(
                        f"Field '{name}' of instance {position} is {row[name]!r} but must be "
                        f"{_TYPE_WORDS[datatype]} or null."
                    )

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """The spec's transform of the rows, its numeric columns as float32 [N, F]."""
        return {"features": self._records.encode(rows)}


class TextEncoder:
    """Texts -> `input_ids`, `attention_mask` int64 [N, T] with the model's tokenizer params."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.fields = [InputField("text", "BYTES")]

    def check(self, rows: list[Any]) -> None:
        """Every row is a string."""
        for position, row in enumerate(rows):
            if not isinstance(row, str):
                raise InvalidDataError(
                    f"Instance {position} is {type(row).__name__}, but this text model takes "
                    "strings."
                )

    def encode(self, rows: list[Any]) -> dict[str, np.ndarray]:
        """Token ids and attention mask, padded to the longest text of the batch."""
        from forgeml.train.models.text_classifier import tokenize

        with _TOKENIZER_LOCK:
            tensors = tokenize(list(rows), self.params)
        return {name: tensor.numpy() for name, tensor in tensors.items()}
