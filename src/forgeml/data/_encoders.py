"""Fitted per-column encoders behind `forgeml.data.features`.

Each encoder is a plain dataclass holding only fitted state and options, so that
`to_dict` / `from_dict` are a field copy. `expressions(frame)` returns the polars
expressions of its output columns; `frame` is only read by the hash encoder, which
hashes the distinct values present (never one row at a time).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from forgeml.core.errors import InvalidDataError

NULL_TOKEN = "__null__"
OTHER_TOKEN = "__other__"
PAD_ID = 0
UNKNOWN_ID = 1
# Words and single punctuation marks: "don't stop!" -> ["don", "'", "t", "stop", "!"].
TOKEN_PATTERN = r"\w+|[^\w\s]"
# Tried in order; a row takes the first that parses. Per-row (not inferred from the first
# value), so a one-record serving batch parses exactly like the training frame.
DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%dT%H:%M:%S%.fZ",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M",
    "%Y/%m/%d",
)
DATE_PARTS = {
    "year": lambda d: d.dt.year(),
    "month": lambda d: d.dt.month(),
    "day": lambda d: d.dt.day(),
    "weekday": lambda d: d.dt.weekday(),  # ISO: Monday=1 ... Sunday=7
    "hour": lambda d: d.dt.hour(),
    "minute": lambda d: d.dt.minute(),
    "second": lambda d: d.dt.second(),
    "dayofyear": lambda d: d.dt.ordinal_day(),
    "quarter": lambda d: d.dt.quarter(),
}


def category_key(column: str) -> pl.Expr:
    """A column as the string keys categorical encoders work on (null -> `__null__`)."""
    return pl.col(column).cast(pl.String).fill_null(NULL_TOKEN)


def _ranked_counts(values: pl.Series) -> pl.DataFrame:
    """Distinct values with counts, most frequent first, ties broken by value."""
    counts = values.value_counts(name="n")
    return counts.sort(["n", values.name], descending=[True, False])


def _index_of(key: pl.Expr, values: list[str], default: int, dtype: pl.DataType) -> pl.Expr:
    return key.replace_strict(values, list(range(len(values))), default=default, return_dtype=dtype)


def _one_hot(index: pl.Expr, names: list[str]) -> list[pl.Expr]:
    return [(index == i).cast(pl.UInt8).alias(name) for i, name in enumerate(names)]


def _numeric_train_values(column: str, train: pl.Series, kind: str) -> pl.Series:
    if not (train.dtype.is_numeric() or train.dtype == pl.Boolean):
        raise InvalidDataError(
            f"Feature '{column}' ({kind}) needs a numeric column but it is {train.dtype}; "
            "use onehot, ordinal or hash for categories."
        )
    values = train.cast(pl.Float64).fill_nan(None).drop_nulls()
    if values.is_empty():
        raise InvalidDataError(
            f"Feature '{column}' ({kind}) has no non-null values in the rows it is fitted on; "
            "drop the feature or fill the column first."
        )
    return values


def _numeric_input(column: str, fill: float) -> pl.Expr:
    return pl.col(column).cast(pl.Float64).fill_nan(None).fill_null(fill)


@dataclass(frozen=True)
class Standardize:
    """(x - mean) / std with train statistics (population std); nulls become the mean."""

    kind: ClassVar[str] = "standardize"
    column: str
    mean: float
    std: float

    @classmethod
    def fit(cls, column: str, train: pl.Series) -> Standardize:
        values = _numeric_train_values(column, train, cls.kind)
        mean, std = (
            values.to_frame().select(pl.all().mean(), pl.all().std(ddof=0).alias("s")).row(0)
        )
        # A constant column maps to 0 rather than dividing by zero.
        return cls(column, mean, std if std > 0 else 1.0)

    def output_columns(self) -> list[str]:
        return [self.column]

    def expressions(self, frame: pl.DataFrame) -> list[pl.Expr]:
        scaled = (_numeric_input(self.column, self.mean) - self.mean) / self.std
        return [scaled.cast(pl.Float32).alias(self.column)]


@dataclass(frozen=True)
class MinMax:
    """(x - min) / (max - min) with train statistics, not clipped; nulls become the mean."""

    kind: ClassVar[str] = "minmax"
    column: str
    minimum: float
    maximum: float
    mean: float

    @classmethod
    def fit(cls, column: str, train: pl.Series) -> MinMax:
        values = _numeric_train_values(column, train, cls.kind)
        stats = values.to_frame().select(
            pl.all().min().alias("min"), pl.all().max().alias("max"), pl.all().mean()
        )
        return cls(column, *stats.row(0))

    def output_columns(self) -> list[str]:
        return [self.column]

    def expressions(self, frame: pl.DataFrame) -> list[pl.Expr]:
        span = self.maximum - self.minimum
        scaled = (_numeric_input(self.column, self.mean) - self.minimum) / (span or 1.0)
        return [scaled.cast(pl.Float32).alias(self.column)]


@dataclass(frozen=True)
class OneHot:
    """One UInt8 indicator per kept train category, plus `column=__other__`.

    The `max_categories` most frequent train values are kept (ties by value); rarer
    ones and values never seen in training go to `__other__`. Null is the value `__null__`.
    """

    kind: ClassVar[str] = "onehot"
    column: str
    categories: list[str]

    @classmethod
    def fit(cls, column: str, train: pl.Series, max_categories: int) -> OneHot:
        ranked = _ranked_counts(train.cast(pl.String).fill_null(NULL_TOKEN))
        kept = ranked.get_column(train.name).head(max_categories).to_list()
        return cls(column, sorted(value for value in kept if value != OTHER_TOKEN))

    def output_columns(self) -> list[str]:
        return [f"{self.column}={value}" for value in [*self.categories, OTHER_TOKEN]]

    def expressions(self, frame: pl.DataFrame) -> list[pl.Expr]:
        n = len(self.categories)
        index = _index_of(category_key(self.column), self.categories, n, pl.UInt32())
        return _one_hot(index, self.output_columns())


@dataclass(frozen=True)
class Ordinal:
    """One Int32 code per value: its position in `categories`, -1 for anything else.

    `categories` is the given order, or the sorted train values (null is `__null__`).
    """

    kind: ClassVar[str] = "ordinal"
    column: str
    categories: list[str]

    @classmethod
    def fit(cls, column: str, train: pl.Series, categories: list[str] | None) -> Ordinal:
        if categories is not None:
            return cls(column, list(categories))
        values = train.cast(pl.String).fill_null(NULL_TOKEN).unique()
        return cls(column, sorted(values.to_list()))

    def output_columns(self) -> list[str]:
        return [self.column]

    def expressions(self, frame: pl.DataFrame) -> list[pl.Expr]:
        code = _index_of(category_key(self.column), self.categories, -1, pl.Int32())
        return [code.alias(self.column)]


def stable_bucket(value: str, buckets: int) -> int:
    """The bucket of `value`: blake2b (64-bit digest) modulo `buckets`, stable everywhere."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % buckets


@dataclass(frozen=True)
class Hash:
    """Stable hashing trick: one-hot `column#0..buckets-1` (UInt8) or one `column` index."""

    kind: ClassVar[str] = "hash"
    column: str
    buckets: int
    output: str

    def output_columns(self) -> list[str]:
        if self.output == "index":
            return [self.column]
        return [f"{self.column}#{i}" for i in range(self.buckets)]

    def expressions(self, frame: pl.DataFrame) -> list[pl.Expr]:
        # Hash each distinct value once in Python; rows are mapped by a vectorised join.
        values = frame.select(category_key(self.column).unique()).to_series().to_list()
        bucket_of = [stable_bucket(value, self.buckets) for value in values]
        if values:
            index = category_key(self.column).replace_strict(
                values, bucket_of, return_dtype=pl.UInt32
            )
        else:  # no rows: polars' in-memory engine cannot run an empty look-up
            index = pl.col(self.column).cast(pl.UInt32, strict=False)
        if self.output == "index":
            return [index.alias(self.column)]
        return _one_hot(index, self.output_columns())


def _as_datetime(column: str, dtype: pl.DataType, date_format: str | None) -> pl.Expr:
    source = pl.col(column)
    if dtype == pl.String:
        formats = (date_format,) if date_format else DATE_FORMATS
        parsed = [source.str.to_datetime(f, strict=False, time_unit="us") for f in formats]
        return pl.coalesce(parsed)
    return source.cast(pl.Datetime("us")) if dtype == pl.Date else source


@dataclass(frozen=True)
class DateParts:
    """Int32 calendar parts `column.year`, ...; unparseable strings and nulls give null."""

    kind: ClassVar[str] = "date_parts"
    column: str
    parts: list[str]
    date_format: str | None
    source_dtype: str  # "string", "date" or "datetime"

    @classmethod
    def fit(
        cls, column: str, train: pl.Series, parts: list[str], date_format: str | None
    ) -> DateParts:
        kinds = {pl.String: "string", pl.Date: "date", pl.Datetime: "datetime"}
        source = kinds.get(train.dtype.base_type())
        if source is None:
            raise InvalidDataError(
                f"Feature '{column}' (date_parts) needs a string, date or datetime column "
                f"but it is {train.dtype}; convert it first."
            )
        return cls(column, list(parts), date_format, source)

    def output_columns(self) -> list[str]:
        return [f"{self.column}.{part}" for part in self.parts]

    def expressions(self, frame: pl.DataFrame) -> list[pl.Expr]:
        when = _as_datetime(self.column, frame.schema[self.column], self.date_format)
        return [
            DATE_PARTS[part](when).cast(pl.Int32).alias(name)
            for part, name in zip(self.parts, self.output_columns(), strict=True)
        ]


def _tokens(column: str, lowercase: bool) -> pl.Expr:
    text = pl.col(column).cast(pl.String)
    return (text.str.to_lowercase() if lowercase else text).str.extract_all(TOKEN_PATTERN)


@dataclass(frozen=True)
class Tokenize:
    """Word-level ids (List[Int64]) padded/truncated to `max_length`; 0 = pad, 1 = unknown.

    `vocab` holds the `vocab_size - 2` most frequent train tokens (ties alphabetically);
    token `vocab[i]` has id `i + 2`.
    """

    kind: ClassVar[str] = "tokenize"
    column: str
    vocab: list[str]
    max_length: int
    lowercase: bool

    @classmethod
    def fit(
        cls, column: str, train: pl.Series, vocab_size: int, max_length: int, lowercase: bool
    ) -> Tokenize:
        if train.dtype != pl.String:
            raise InvalidDataError(
                f"Feature '{column}' (tokenize) needs a string column but it is {train.dtype}."
            )
        tokens = train.to_frame().select(_tokens(column, lowercase).explode().drop_nulls())
        ranked = _ranked_counts(tokens.to_series())
        vocab = ranked.get_column(column).head(vocab_size - 2).to_list()
        return cls(column, vocab, max_length, lowercase)

    def output_columns(self) -> list[str]:
        return [self.column]

    def expressions(self, frame: pl.DataFrame) -> list[pl.Expr]:
        # Truncate before the lookup: ids past max_length would be dropped anyway.
        tokens = _tokens(self.column, self.lowercase).list.head(self.max_length)
        ids = tokens.list.eval(
            pl.element().replace_strict(
                self.vocab,
                list(range(2, len(self.vocab) + 2)),
                default=UNKNOWN_ID,
                return_dtype=pl.Int64,
            )
        )
        padding = pl.lit([PAD_ID] * self.max_length, dtype=pl.List(pl.Int64))
        padded = pl.concat_list([ids.fill_null([]), padding]).list.head(self.max_length)
        return [padded.alias(self.column)]


Encoder = Standardize | MinMax | OneHot | Ordinal | Hash | DateParts | Tokenize
ENCODERS: dict[str, type[Encoder]] = {
    cls.kind: cls for cls in (Standardize, MinMax, OneHot, Ordinal, Hash, DateParts, Tokenize)
}


def encoder_to_dict(encoder: Encoder) -> dict[str, Any]:
    """The encoder's fitted state as a JSON-serialisable dict with its `kind`."""
    return {"kind": encoder.kind, **dataclasses.asdict(encoder)}


def encoder_from_dict(data: dict[str, Any]) -> Encoder:
    """Rebuild an encoder from `encoder_to_dict` output; KeyError/TypeError when malformed."""
    fields = dict(data)
    return ENCODERS[fields.pop("kind")](**fields)


def target_classes(target: pl.Series) -> list[Any] | None:
    """Sorted distinct non-null values of a classification target; None for a float one."""
    if target.dtype.is_float():
        return None  # a regression target has no classes
    if not (target.dtype.is_integer() or target.dtype == pl.Boolean):
        target = target.cast(pl.String)
    return target.drop_nulls().unique().sort().to_list()


def schema_to_dict(schema: dict[str, pl.DataType]) -> dict[str, Any]:
    """A schema as JSON: Arrow IPC of an empty frame (exact for any dtype) + readable dtypes."""
    buffer = io.BytesIO()
    pl.DataFrame(schema=schema).write_ipc(buffer)
    return {
        "dtypes": {name: str(dtype) for name, dtype in schema.items()},
        "arrow_ipc_base64": base64.b64encode(buffer.getvalue()).decode("ascii"),
    }


def schema_from_dict(data: dict[str, Any]) -> dict[str, pl.DataType]:
    """Read back `schema_to_dict` output."""
    raw = base64.b64decode(data["arrow_ipc_base64"])
    return dict(pl.read_ipc(io.BytesIO(raw)).schema)
