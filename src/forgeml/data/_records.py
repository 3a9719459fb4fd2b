"""Raw serving records -> model input matrix, without building a polars frame per call.

`feature_matrix(spec, spec.transform_records(records))` spends milliseconds per call on
building a one-row frame and planning dozens of expressions, while the model's forward pass
takes a tenth of a millisecond. `RecordEncoder` computes the same float32 [N, F] matrix
with numpy and dictionary look-ups, bit for bit, for the features whose result it can
reproduce exactly: standardize and minmax (numeric inputs), onehot, ordinal and hash
(string inputs), and numeric passthrough columns.

Everything else goes through the polars path, so results and errors stay those of
`transform_records`: the whole spec when it holds anything the fast path does not cover
(decided once, at construction), and one call when a record is not plainly of the fitted
types (a missing field, a value polars would reject or convert differently, a target or
reserved field to check).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import polars as pl

from forgeml.data._encoders import (
    NULL_TOKEN,
    Encoder,
    Hash,
    MinMax,
    OneHot,
    Ordinal,
    Standardize,
    stable_bucket,
)
from forgeml.data._frame import RESERVED_COLUMNS

if TYPE_CHECKING:
    from forgeml.data.features import FeatureSpec

PolarsPath = Callable[[list[Any]], np.ndarray]
_MISSING = object()  # neither None nor a value any reader takes, so a missing field defers


@dataclass(frozen=True)
class _NumericType:
    """How the fast path reads a numeric column: its numpy type and the values it takes.

    Ints are taken within `low`..`high`: the type's range, or for a float column the ints
    it holds exactly (larger ones may round differently in polars and numpy).
    """

    numpy: type[np.generic]
    low: int
    high: int

    def takes(self, value: Any) -> bool:
        """True for a non-null value polars stores in this column exactly as numpy does."""
        if self.numpy is np.bool_:
            return type(value) is bool
        if type(value) is float:
            return self.numpy is np.float32 or self.numpy is np.float64
        return type(value) is int and self.low <= value <= self.high


def _integer(numpy: type[np.integer[Any]]) -> _NumericType:
    info = np.iinfo(numpy)
    return _NumericType(numpy, int(info.min), int(info.max))


_NUMERIC_TYPES: dict[Any, _NumericType] = {
    pl.Int8: _integer(np.int8),
    pl.Int16: _integer(np.int16),
    pl.Int32: _integer(np.int32),
    pl.Int64: _integer(np.int64),
    pl.UInt8: _integer(np.uint8),
    pl.UInt16: _integer(np.uint16),
    pl.UInt32: _integer(np.uint32),
    pl.UInt64: _integer(np.uint64),
    pl.Float32: _NumericType(np.float32, -(2**24), 2**24),
    pl.Float64: _NumericType(np.float64, -(2**53), 2**53),
    pl.Boolean: _NumericType(np.bool_, 0, 0),
}

Readers = dict[str, _NumericType | None]  # None: the column is read as string keys


@dataclass(frozen=True)
class _Numbers:
    """A numeric column as its training numpy type, with nulls stored as 0 and flagged."""

    values: np.ndarray
    nulls: np.ndarray


@dataclass
class _Inputs:
    """The records' input columns, checked: string keys (null -> `__null__`) and numbers."""

    rows: int
    keys: dict[str, list[str]]
    numbers: dict[str, _Numbers]


def _read_keys(values: list[Any]) -> list[str] | None:
    """Category keys as `category_key` makes them; None if a value is not a plain str."""
    keys = []
    for value in values:
        if value is None:
            keys.append(NULL_TOKEN)
        elif type(value) is str and (value.isascii() or _is_utf8(value)):
            keys.append(value)
        else:
            return None
    return keys


def _is_utf8(value: str) -> bool:
    # A lone surrogate (possible from JSON) is refused by polars; leave it to that path.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_numbers(values: list[Any], kind: _NumericType) -> _Numbers | None:
    """A numeric column; None if a value is not one `kind` takes exactly."""
    filled: list[Any] = []
    nulls: list[bool] = []
    for value in values:
        if value is None:
            filled.append(0)
            nulls.append(True)
        elif kind.takes(value):
            filled.append(value)
            nulls.append(False)
        else:
            return None
    return _Numbers(np.array(filled, dtype=kind.numpy), np.array(nulls, dtype=bool))


class _Step(Protocol):
    """Writes one feature's columns of the output matrix."""

    def write(self, inputs: _Inputs, out: np.ndarray) -> None: ...


@dataclass(frozen=True)
class _Scaled:
    """Standardize / MinMax: `(x - shift) / scale` in float64; null and NaN become `fill`."""

    column: str
    fill: float
    shift: float
    scale: float
    position: int

    def write(self, inputs: _Inputs, out: np.ndarray) -> None:
        numbers = inputs.numbers[self.column]
        x = numbers.values.astype(np.float64)
        x[numbers.nulls | np.isnan(x)] = self.fill
        out[:, self.position] = ((x - self.shift) / self.scale).astype(np.float32)


@dataclass(frozen=True)
class _Indicators:
    """OneHot: a 1 in the column of the key's category, or of `__other__`."""

    column: str
    index: dict[str, int]
    positions: np.ndarray  # matrix column of each category, `__other__` last

    def write(self, inputs: _Inputs, out: np.ndarray) -> None:
        other = len(self.positions) - 1
        chosen = [self.index.get(key, other) for key in inputs.keys[self.column]]
        out[np.arange(inputs.rows), self.positions[chosen]] = 1.0


@dataclass(frozen=True)
class _Codes:
    """Ordinal: the key's position in the categories, -1 for anything else."""

    column: str
    index: dict[str, int]
    position: int

    def write(self, inputs: _Inputs, out: np.ndarray) -> None:
        out[:, self.position] = [self.index.get(key, -1) for key in inputs.keys[self.column]]


@dataclass(frozen=True)
class _Buckets:
    """Hash: the key's stable bucket, as an index column or a 1 in the bucket's column."""

    column: str
    buckets: int
    index_output: bool
    positions: np.ndarray  # one column (index output) or one per bucket (onehot output)

    def write(self, inputs: _Inputs, out: np.ndarray) -> None:
        chosen = [stable_bucket(key, self.buckets) for key in inputs.keys[self.column]]
        if self.index_output:
            out[:, self.positions[0]] = chosen
        else:
            out[np.arange(inputs.rows), self.positions[chosen]] = 1.0


@dataclass(frozen=True)
class _Passthrough:
    """A numeric input cast straight to float32, as polars casts it; nulls are stored as 0."""

    column: str
    position: int

    def write(self, inputs: _Inputs, out: np.ndarray) -> None:
        # Not through float64: an int64 would be rounded twice and could land one step off.
        out[:, self.position] = inputs.numbers[self.column].values.astype(np.float32)


class _UnsupportedSpecError(Exception):
    """The spec holds something the fast path does not reproduce exactly (internal)."""


def _index(categories: list[str]) -> dict[str, int]:
    index = {value: i for i, value in enumerate(categories)}
    if len(index) < len(categories) or not all(type(value) is str for value in categories):
        raise _UnsupportedSpecError("categories repeat a value or are not strings")
    return index


def _step(encoder: Encoder, place: Callable[[list[str]], np.ndarray]) -> _Step:
    """The fast step of one encoder; `place` maps its output names to matrix columns."""
    column = encoder.column
    if isinstance(encoder, Standardize):
        scale = float(encoder.std)
        return _Scaled(column, float(encoder.mean), float(encoder.mean), scale, *place([column]))
    if isinstance(encoder, MinMax):
        span = float(encoder.maximum) - float(encoder.minimum)
        shift = float(encoder.minimum)
        return _Scaled(column, float(encoder.mean), shift, span or 1.0, *place([column]))
    if isinstance(encoder, OneHot):
        return _Indicators(column, _index(encoder.categories), place(encoder.output_columns()))
    if isinstance(encoder, Ordinal):
        return _Codes(column, _index(encoder.categories), *place([column]))
    if isinstance(encoder, Hash):
        index_output = encoder.output == "index"
        return _Buckets(column, encoder.buckets, index_output, place(encoder.output_columns()))
    raise _UnsupportedSpecError(f"{encoder.kind} features")


def _readers(spec: FeatureSpec, encoders: list[Encoder]) -> Readers:
    """How each input column is read: as numbers of a type, or as string keys (None)."""
    categorical = {e.column for e in encoders if isinstance(e, OneHot | Ordinal | Hash)}
    readers: Readers = {}
    for name in spec.input_columns:
        dtype = spec.input_schema[name]
        if dtype == pl.String:
            readers[name] = None
        elif name in categorical:
            # polars' string cast of other types may differ from Python's str().
            raise _UnsupportedSpecError(f"a categorical feature on a {dtype} column")
        elif dtype.base_type() in _NUMERIC_TYPES:
            readers[name] = _NUMERIC_TYPES[dtype.base_type()]
        else:
            raise _UnsupportedSpecError(f"an input column of type {dtype}")
    return readers


def _plan(spec: FeatureSpec, columns: list[str]) -> tuple[list[_Step], Readers]:
    """The steps that fill every matrix column once, and the input readers they need."""
    positions = {name: i for i, name in enumerate(columns)}
    placed: list[int] = []

    def place(names: list[str]) -> np.ndarray:
        if any(name not in positions for name in names):
            raise _UnsupportedSpecError("a feature output the matrix does not keep")
        placed.extend(positions[name] for name in names)
        return np.array([positions[name] for name in names], dtype=np.intp)

    steps = [_step(encoder, place) for encoder in spec.encoders]
    readers = _readers(spec, spec.encoders)
    for name in spec.passthrough:
        if name in positions:
            if readers[name] is None:
                raise _UnsupportedSpecError("a string passthrough column in the matrix")
            steps.append(_Passthrough(name, *place([name])))
    if sorted(placed) != list(range(len(columns))):
        raise _UnsupportedSpecError("matrix columns the fast steps do not fill exactly once")
    return steps, readers


class RecordEncoder:
    """Raw records -> `feature_matrix(spec, spec.transform_records(records))`, only faster.

    Build one with `forgeml.data.features.record_encoder(spec)`; it is immutable, so one
    instance serves any number of threads.
    """

    def __init__(self, spec: FeatureSpec, columns: list[str], polars_path: PolarsPath) -> None:
        """Plan the fast path for `spec`.

        Args:
            spec: the fitted feature spec.
            columns: the matrix columns the polars path produces, in order.
            polars_path: the reference encoder, used for anything the fast path does not cover.
        """
        self._polars_path = polars_path
        self._optional = [name for name in (spec.target, *RESERVED_COLUMNS) if name]
        self.fallback_reason: str | None = None
        self._steps: list[_Step] = []
        self._readers: Readers = {}
        self._width = len(columns)
        try:
            if not columns:
                raise _UnsupportedSpecError("no numeric matrix columns")
            self._steps, self._readers = _plan(spec, columns)
        except _UnsupportedSpecError as reason:
            self.fallback_reason = str(reason)

    def encode(self, records: list[Any]) -> np.ndarray:
        """The model input of `records`, float32 [N, F].

        Raises:
            MissingColumnError: a record lacks one of the spec's input columns.
            InvalidDataError: a value does not fit its column's training dtype.
        """
        inputs = None if self.fallback_reason else self._read(records)
        if inputs is None:
            return self._polars_path(records)
        out = np.zeros((inputs.rows, self._width), dtype=np.float32)
        # Overflow to inf when casting to float32 is what polars does too, silently.
        with np.errstate(over="ignore", invalid="ignore"):
            for step in self._steps:
                step.write(inputs, out)
        return out

    def _read(self, records: list[Any]) -> _Inputs | None:
        """The checked input columns of `records`; None when the polars path must decide."""
        if not all(type(record) is dict for record in records):
            return None
        if any(name in record for record in records for name in self._optional):
            return None  # the polars path checks these fields' types too
        inputs = _Inputs(len(records), {}, {})
        for name, kind in self._readers.items():
            values = [record.get(name, _MISSING) for record in records]
            if kind is None:
                keys = _read_keys(values)
                if keys is None:
                    return None
                inputs.keys[name] = keys
            else:
                with np.errstate(over="ignore"):  # a float beyond float32 becomes inf, as in polars
                    numbers = _read_numbers(values, kind)
                if numbers is None:
                    return None
                inputs.numbers[name] = numbers
        return inputs
