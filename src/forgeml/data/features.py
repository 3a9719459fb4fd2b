"""Feature engineering: a YAML spec fitted on the train split, applied the same way everywhere.

`FeatureSpec.fit` learns statistics, category lists and vocabularies from the train rows
only (rows with `__split__ == "train"`, or all rows when there is no split); `transform`
applies them to any frame and `transform_records` to raw serving records through the same
code path, so training and serving cannot skew; `record_encoder` gives serving the same
model input without polars per call. The fitted spec round-trips through JSON.

Output columns, in config order, then passthrough, target, `__split__`, `__augmented__`:

| kind | columns | dtype |
|---|---|---|
| standardize, minmax | `age` | Float32 (nulls -> train mean) |
| onehot | `workclass=Private`, ..., `workclass=__other__` | UInt8 |
| ordinal | `education` (-1 = unknown) | Int32 |
| hash | `country#0` ... `country#{buckets-1}`, or `country` with `output: index` | UInt8, UInt32 |
| date_parts | `when.year`, `when.month`, ... (null when unparseable) | Int32 |
| tokenize | `sentence` (0 = pad, 1 = unknown) | List(Int64) |

Null categories are the value `__null__`. The target is passed through raw; its classes
(sorted train values, unless it is a float column) are in `label_classes`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from forgeml.core.errors import ConfigError, InvalidDataError, MissingColumnError
from forgeml.data._encoders import (
    DATE_PARTS,
    DateParts,
    Encoder,
    Hash,
    MinMax,
    OneHot,
    Ordinal,
    Standardize,
    Tokenize,
    encoder_from_dict,
    encoder_to_dict,
    schema_from_dict,
    schema_to_dict,
    target_classes,
)
from forgeml.data._frame import (
    AUGMENTED_COLUMN,
    RESERVED_COLUMNS,
    SPLIT_COLUMN,
    TransformOutput,
    require_columns,
)
from forgeml.data._records import RecordEncoder

FORMAT_VERSION = 1
_RESERVED_DTYPES: dict[str, pl.DataType] = {
    SPLIT_COLUMN: pl.String(),
    AUGMENTED_COLUMN: pl.Boolean(),
}
DatePart = Literal[tuple(DATE_PARTS)]  # type: ignore[valid-type]


class _Feature(BaseModel):
    model_config = ConfigDict(extra="forbid")

    column: str = Field(min_length=1, description="Input column the feature is computed from.")


class StandardizeFeature(_Feature):
    kind: Literal["standardize"] = Field(description="(x - train mean) / train std, Float32.")


class MinMaxFeature(_Feature):
    kind: Literal["minmax"] = Field(description="(x - train min) / (train max - min), Float32.")


class OneHotFeature(_Feature):
    kind: Literal["onehot"] = Field(description="One UInt8 indicator column per category.")
    max_categories: int = Field(
        default=50, ge=1, description="Most frequent train values kept; rarer -> __other__."
    )


class OrdinalFeature(_Feature):
    kind: Literal["ordinal"] = Field(description="One Int32 code per category, -1 if unknown.")
    categories: list[str] | None = Field(
        default=None, min_length=1, description="Explicit code order; default: sorted train values."
    )

    @model_validator(mode="after")
    def _check_unique(self) -> OrdinalFeature:
        if self.categories is not None and len(set(self.categories)) < len(self.categories):
            raise ValueError("categories must not repeat a value")
        return self


class HashFeature(_Feature):
    kind: Literal["hash"] = Field(description="Stable blake2b hashing trick into buckets.")
    buckets: int = Field(default=32, ge=2, le=65536, description="Number of hash buckets.")
    output: Literal["onehot", "index"] = Field(
        default="onehot", description="onehot: column#0..N-1 indicators; index: one bucket id."
    )


class DatePartsFeature(_Feature):
    kind: Literal["date_parts"] = Field(description="Calendar parts of a date or datetime.")
    parts: list[DatePart] = Field(  # type: ignore[valid-type]
        default=["year", "month", "day", "weekday"],
        min_length=1,
        description=f"Parts to extract, from: {', '.join(DATE_PARTS)} (weekday: Monday=1).",
    )
    format: str | None = Field(
        default=None, description="strftime format of string input; default: ISO 8601 forms."
    )


class TokenizeFeature(_Feature):
    kind: Literal["tokenize"] = Field(description="Word-level token ids, 0 = pad, 1 = unknown.")
    vocab_size: int = Field(default=20000, ge=3, description="Vocabulary size incl. pad, unk.")
    max_length: int = Field(default=64, ge=1, description="Ids per row (padded / truncated).")
    lowercase: bool = Field(default=True, description="Lowercase text before tokenizing.")


FeatureConfig = Annotated[
    StandardizeFeature
    | MinMaxFeature
    | OneHotFeature
    | OrdinalFeature
    | HashFeature
    | DatePartsFeature
    | TokenizeFeature,
    Field(discriminator="kind"),
]


class FeatureSpecConfig(BaseModel):
    """The `--spec` YAML of `forgeml data features`."""

    model_config = ConfigDict(extra="forbid")

    target: str | None = Field(
        default=None, description="Label column: passed through raw, classes kept in the spec."
    )
    features: list[FeatureConfig] = Field(min_length=1, description="Features to compute.")
    passthrough: list[str] = Field(default=[], description="Columns copied unchanged.")

    @model_validator(mode="after")
    def _check_columns(self) -> FeatureSpecConfig:
        named = [f.column for f in self.features] + self.passthrough
        if self.target is not None:
            named.append(self.target)
        reserved = [name for name in named if name in RESERVED_COLUMNS]
        if reserved:
            raise ValueError(f"'{reserved[0]}' is reserved and always kept; do not list it")
        if self.target is not None and self.target in named[:-1]:
            raise ValueError(f"the target '{self.target}' must not be a feature or passthrough")
        return self


def _fit_encoder(feature: FeatureConfig, train: pl.Series) -> Encoder:
    column = feature.column
    if isinstance(feature, StandardizeFeature):
        return Standardize.fit(column, train)
    if isinstance(feature, MinMaxFeature):
        return MinMax.fit(column, train)
    if isinstance(feature, OneHotFeature):
        return OneHot.fit(column, train, feature.max_categories)
    if isinstance(feature, OrdinalFeature):
        return Ordinal.fit(column, train, feature.categories)
    if isinstance(feature, HashFeature):
        return Hash(column, feature.buckets, feature.output)
    if isinstance(feature, DatePartsFeature):
        return DateParts.fit(column, train, list(feature.parts), feature.format)
    return Tokenize.fit(column, train, feature.vocab_size, feature.max_length, feature.lowercase)


def _train_rows(frame: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    if SPLIT_COLUMN not in frame.columns:
        return frame, None
    train = frame.filter(pl.col(SPLIT_COLUMN) == "train")
    if train.is_empty():
        raise InvalidDataError(
            f"The data has a {SPLIT_COLUMN} column but no 'train' rows to fit features on; "
            "re-split it so that the train split is not empty."
        )
    return train, "train"


def _summary(encoder: Encoder) -> dict[str, Any]:
    # Fitted lists (categories, vocab) are reported by size, so the report stays small.
    fitted = {
        key: len(value) if isinstance(value, list) else value
        for key, value in encoder_to_dict(encoder).items()
    }
    return {**fitted, "output_columns": len(encoder.output_columns())}


class FeatureSpec:
    """A fitted feature spec: everything `transform` needs, JSON-serialisable.

    Build one with `FeatureSpec.fit(frame, config)` or `FeatureSpec.from_dict(data)`.
    """

    def __init__(
        self,
        encoders: list[Encoder],
        passthrough: list[str],
        target: str | None,
        label_classes: list[Any] | None,
        input_schema: dict[str, pl.DataType],
        fitted_on: dict[str, Any],
    ) -> None:
        self.encoders = encoders
        self.passthrough = passthrough
        self.target = target
        self.label_classes = label_classes
        self.input_schema = input_schema
        self.fitted_on = fitted_on
        self._check_output_names()

    @classmethod
    def fit(cls, frame: pl.DataFrame, config: FeatureSpecConfig) -> FeatureSpec:
        """Fit `config` on the train rows of `frame` (all rows when it has no `__split__`).

        Args:
            frame: a dataset version, possibly with reserved columns.
            config: the validated feature spec.

        Returns:
            The fitted spec.

        Raises:
            MissingColumnError: a feature, passthrough or target column is not in `frame`.
            InvalidDataError: there are no train rows, or a column has the wrong type.
            ConfigError: two features would produce the same output column.
        """
        inputs = list(dict.fromkeys([f.column for f in config.features] + config.passthrough))
        known = inputs + ([config.target] if config.target else [])
        require_columns(frame, known, "The feature spec")
        train, split = _train_rows(frame)
        encoders = [_fit_encoder(f, train.get_column(f.column)) for f in config.features]
        classes = target_classes(train.get_column(config.target)) if config.target else None
        kept = known + [name for name in RESERVED_COLUMNS if name in frame.columns]
        return cls(
            encoders=encoders,
            passthrough=list(config.passthrough),
            target=config.target,
            label_classes=classes,
            input_schema={name: frame.schema[name] for name in kept},
            fitted_on={"split": split, "rows": train.height},
        )

    @property
    def input_columns(self) -> list[str]:
        """Columns every input must have (the target and reserved columns are optional)."""
        columns = [encoder.column for encoder in self.encoders] + self.passthrough
        return list(dict.fromkeys(columns))

    @property
    def output_columns(self) -> list[str]:
        """The model-input columns `transform` produces (target and reserved ones follow)."""
        produced = [name for encoder in self.encoders for name in encoder.output_columns()]
        return produced + self.passthrough

    def _optional_columns(self) -> list[str]:
        # Reserved columns are kept whenever present, even if the fit data had none.
        return [self.target, *RESERVED_COLUMNS] if self.target else list(RESERVED_COLUMNS)

    def _dtype(self, name: str) -> pl.DataType:
        known = self.input_schema.get(name)
        return known if known is not None else _RESERVED_DTYPES[name]

    def _check_output_names(self) -> None:
        seen: set[str] = set()
        for name in self.output_columns + self._optional_columns():
            if name in seen:
                raise ConfigError(
                    f"The feature spec produces column '{name}' twice; use one feature "
                    "per column name or drop it from passthrough."
                )
            seen.add(name)

    def _conform(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Cast columns to their training dtypes, so every input is encoded the same way."""
        for name, dtype in frame.schema.items():
            expected = self.input_schema.get(name)
            if expected is None or dtype == expected:
                continue
            try:
                frame = frame.with_columns(pl.col(name).cast(expected, strict=True))
            except pl.exceptions.PolarsError:
                raise InvalidDataError(
                    f"Column '{name}' is {dtype} but the feature spec was fitted on {expected} "
                    "and some values cannot be converted; fix the column's values or type."
                ) from None
        return frame

    def transform(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Apply the fitted features to `frame` (any split, any rows).

        Args:
            frame: rows with at least `input_columns`; values unseen in training are fine.

        Returns:
            `output_columns`, then the target, `__split__` and `__augmented__` when present.

        Raises:
            MissingColumnError: `frame` lacks one of `input_columns`.
            InvalidDataError: a column cannot be converted to its training dtype.
        """
        return self._transform(frame, engine="auto")

    def _transform(self, frame: pl.DataFrame, engine: Literal["auto", "in-memory"]) -> pl.DataFrame:
        require_columns(frame, self.input_columns, "The feature spec")
        kept = [name for name in self._optional_columns() if name in frame.columns]
        frame = self._conform(frame.select(self.input_columns + kept))
        expressions = [expr for encoder in self.encoders for expr in encoder.expressions(frame)]
        expressions += [pl.col(name) for name in self.passthrough + kept]
        return frame.lazy().select(expressions).collect(engine=engine)

    def transform_records(self, records: list[dict[str, Any]]) -> pl.DataFrame:
        """Transform raw serving records exactly as `transform` does a frame of them.

        Args:
            records: one dict per row, holding at least `input_columns` (values may be None).

        Returns:
            One transformed row per record, in order.

        Raises:
            MissingColumnError: a record lacks one of `input_columns`.
            InvalidDataError: a value does not fit its column's training dtype.
        """
        required = self.input_columns
        for position, record in enumerate(records):
            for name in required:
                if name not in record:
                    raise MissingColumnError(
                        f"Record {position} has no field '{name}', which the feature spec "
                        f"needs (fields needed: {', '.join(required)})."
                    )
        optional = [n for n in self._optional_columns() if any(n in r for r in records)]
        columns = []
        for name in required + optional:
            values = [record.get(name) for record in records]
            try:
                columns.append(pl.Series(name, values, dtype=self._dtype(name)))
            except (TypeError, ValueError, pl.exceptions.PolarsError):
                raise InvalidDataError(
                    f"Field '{name}' has values that are not {self._dtype(name)}, the type "
                    "the feature spec was fitted on; send values of that type."
                ) from None
        # a few records: the in-memory engine skips the streaming engine's set-up (2x faster)
        return self._transform(pl.DataFrame(columns), engine="in-memory")

    def to_dict(self) -> dict[str, Any]:
        """The fitted spec as a JSON-serialisable dict (read back by `from_dict`)."""
        label = {"column": self.target, "classes": self.label_classes} if self.target else None
        return {
            "format_version": FORMAT_VERSION,
            "features": [encoder_to_dict(encoder) for encoder in self.encoders],
            "passthrough": list(self.passthrough),
            "label": label,
            "input_schema": schema_to_dict(self.input_schema),
            "fitted_on": dict(self.fitted_on),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeatureSpec:
        """Rebuild a spec from `to_dict` output.

        Raises:
            ConfigError: `data` has another `format_version` or is malformed.
        """
        version = data.get("format_version") if isinstance(data, dict) else None
        if version != FORMAT_VERSION:
            raise ConfigError(
                f"Feature spec format_version {version!r} is not supported (this forgeml reads "
                f"{FORMAT_VERSION}); refit the spec with this version of forgeml."
            )
        try:
            label = data["label"]
            return cls(
                encoders=[encoder_from_dict(item) for item in data["features"]],
                passthrough=list(data["passthrough"]),
                target=label["column"] if label else None,
                label_classes=label["classes"] if label else None,
                input_schema=schema_from_dict(data["input_schema"]),
                fitted_on=dict(data["fitted_on"]),
            )
        except (KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as error:
            raise ConfigError(
                f"Feature spec is malformed ({type(error).__name__}: {error}); "
                "refit it instead of editing it by hand."
            ) from None


def apply(frame: pl.DataFrame, params: FeatureSpecConfig) -> TransformOutput:
    """Fit `params` on the train rows of `frame` and transform every row.

    Args:
        frame: a dataset version.
        params: the feature spec.

    Returns:
        The transformed rows, the fitted spec as artifact `feature_spec`, and a report of
        what was fitted on how many rows.

    Raises:
        MissingColumnError, InvalidDataError, ConfigError: see `FeatureSpec.fit`.
    """
    spec = FeatureSpec.fit(frame, params)
    transformed = spec.transform(frame)
    split = spec.fitted_on["split"]
    report = {
        "fitted_on": f"{split} split" if split else f"all rows (no {SPLIT_COLUMN} column)",
        "fitted_rows": spec.fitted_on["rows"],
        "rows": transformed.height,
        "output_columns": len(spec.output_columns),
        "features": [_summary(encoder) for encoder in spec.encoders],
        "label_classes": spec.label_classes,
    }
    return TransformOutput(
        frame=transformed, report=report, artifacts={"feature_spec": spec.to_dict()}
    )


def feature_columns(spec: FeatureSpec, schema: pl.Schema) -> list[str]:
    """The numeric model-input columns of a transformed frame (lists and text left out)."""
    left_out = {spec.target, *RESERVED_COLUMNS}
    return [
        name
        for name in spec.output_columns
        if name not in left_out and (schema[name].is_numeric() or schema[name] == pl.Boolean)
    ]


def feature_matrix(spec: FeatureSpec, transformed: pl.DataFrame) -> np.ndarray:
    """A transformed frame's model input: its numeric feature columns as float32 [N, F].

    Training (`forgeml.train.data.feature_tensor`) and serving both call this. Nulls (e.g. an
    unparseable date part) become 0.

    Raises:
        ConfigError: the spec produces no numeric column.
    """
    columns = feature_columns(spec, transformed.schema)
    if not columns:
        raise ConfigError(
            "The feature spec produces no numeric columns to train on; add standardize, "
            "onehot, ordinal, hash or date_parts features to it."
        )
    values = transformed.select(pl.col(columns).cast(pl.Float32).fill_null(0.0)).to_numpy()
    return np.ascontiguousarray(values, dtype=np.float32)


def record_encoder(spec: FeatureSpec) -> RecordEncoder:
    """A fast, reusable encoder of raw serving records into the model input of `spec`.

    Its `encode(records)` returns `feature_matrix(spec, spec.transform_records(records))`
    exactly (same columns, values bit for bit, same errors) in a fraction of the time; specs
    or records it cannot reproduce exactly go through that polars path. Build it once per
    spec: construction runs the polars path on no records to learn the matrix columns.
    """
    columns = feature_columns(spec, spec.transform_records([]).schema)

    def polars_path(records: list[Any]) -> np.ndarray:
        return feature_matrix(spec, spec.transform_records(records))

    return RecordEncoder(spec, columns, polars_path)
