"""The reference profile: a training split summarised once, kept to compare windows with.

Per numeric column: the counts of quantile bins whose inner edges are the reference's
minimum, its quantiles and a hair above its maximum (so values beyond the reference's
range fall in bins of their own, and a mass point such as a constant gets its own bin),
the standard deviation, and a sketch of its distribution: `ReferenceOptions.quantiles`
quantiles at the mid-points (k + 1/2) / m, from which KS and Wasserstein are computed
against a live sample (`_statistics.ks_against_quantiles`). Per categorical column (text,
categorical, boolean): the counts of its `top_k` categories and of the rest. Missing
values (null, NaN, infinite) are counted, not binned. Besides: a small seeded sample of
whole rows (`row_sample_size`, for the domain classifier and text MMD), and optionally
the profile of the model's own outputs on its validation split (prediction drift).

`FORMAT` names the JSON shape: a profile of another format is refused by `from_json`
(`StaleReferenceError`), and a kept one is rebuilt rather than misread.

Building reads the numeric columns once to make them finite Float64, then runs two
`select`s over that: one for the counts of missing values, minima, maxima and deviations,
one for the bin counts (the edges and quantiles come from a seeded sample of at most
`sample_size` rows); plus one value count per categorical column.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
import orjson
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from forgeml.core.errors import EmptyWindowError, InvalidDataError
from forgeml.data._frame import require_columns, user_columns
from forgeml.monitor.drift._config import ReferenceOptions

TEXT_DISTINCT_SHARE = 0.5  # a string column this distinct is text, not categories
FORMAT = 2  # bump when the JSON shape changes (1: numeric columns kept a value sample)
QUANTILE_DIGITS = 7  # significant digits a kept quantile is rounded to
# a kept row's floats: a histogram-binned classifier cannot see below 1 part in 255
ROW_DIGITS = 4
Kind = Literal["numeric", "categorical"]


class StaleReferenceError(InvalidDataError):
    """A reference profile written in another format: rebuild it, do not read it."""


class NumericReference(BaseModel):
    """A numeric column of the reference: bins, deviation and a quantile sketch."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["numeric"] = "numeric"
    rows: int
    missing: int = Field(description="Null, NaN or infinite values.")
    edges: list[float] = Field(description="Inner bin edges, increasing.")
    counts: list[int] = Field(description="Values per bin: below edges[0], ..., from edges[-1].")
    std: float | None = Field(description="Standard deviation (None with under two values).")
    quantiles: list[float] = Field(
        description="Quantiles at the mid-points (k + 1/2) / m of the finite values, increasing."
    )
    sketched: int = Field(description="Finite values the quantiles were found from.")


class CategoricalReference(BaseModel):
    """A categorical column of the reference: counts of its top categories and the rest."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["categorical"] = "categorical"
    rows: int
    missing: int
    categories: dict[str, int] = Field(description="The top_k categories by count.")
    other: int = Field(description="Values in every other category.")


ColumnReference = Annotated[NumericReference | CategoricalReference, Field(discriminator="kind")]


class ReferenceProfile(BaseModel):
    """What drift is measured against; JSON-serialisable, to keep with a model version."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    rows: int
    options: ReferenceOptions
    columns: dict[str, ColumnReference]
    prediction: str | None = Field(
        default=None, description="The column holding the model's predictions, if any."
    )
    skipped: dict[str, str] = Field(
        default_factory=dict, description="Columns of unsupported types, by dtype."
    )
    text_columns: list[str] = Field(
        default_factory=list,
        description="String columns of mostly distinct values (free text): MMD of embeddings.",
    )
    row_sample: dict[str, list[Any]] = Field(
        default_factory=dict, description="A seeded sample of whole rows, by column."
    )
    predictions: ReferenceProfile | None = Field(
        default=None,
        description="The profile of the model's outputs on its validation split, if known.",
    )

    @property
    def features(self) -> list[str]:
        """The profiled columns other than the prediction."""
        return [name for name in self.columns if name != self.prediction]

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> ReferenceProfile:
        """Parse a profile written by `to_json`.

        Raises:
            StaleReferenceError: the profile has another format (an older forgeml's).
            InvalidDataError: the text is not a reference profile.
        """
        from pydantic import ValidationError

        found = _format_of(text)
        if found is not None and found != FORMAT:
            raise StaleReferenceError(
                f"The drift reference has format {found}, not {FORMAT}; build it again "
                "from its data (a kept model reference is rebuilt by itself)."
            )
        try:
            return cls.model_validate_json(text)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top level)"
            raise InvalidDataError(
                f"Not a drift reference profile: {where}: {first['msg']}."
            ) from None


def _format_of(text: str | bytes) -> int | None:
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    found = parsed.get("format") if isinstance(parsed, dict) else None
    return found if isinstance(found, int) else None


def rounded(values: np.ndarray) -> list[float]:
    """`values` to `QUANTILE_DIGITS` significant digits (a shorter JSON, the same figures)."""
    return [float(f"{value:.{QUANTILE_DIGITS}g}") for value in values.tolist()]


def quantile_grid(count: int) -> np.ndarray:
    """The probabilities a sketch keeps quantiles at: (k + 1/2) / count."""
    return (np.arange(count) + 0.5) / count


def column_kind(dtype: pl.DataType) -> Kind | None:
    """How drift treats a column of `dtype`, or None where it cannot."""
    if dtype.is_numeric():
        return "numeric"
    if dtype in (pl.String, pl.Categorical, pl.Boolean) or isinstance(dtype, pl.Enum):
        return "categorical"
    return None


def finite(name: str) -> pl.Expr:
    """The column as Float64 with NaN and infinities made null."""
    values = pl.col(name).cast(pl.Float64)
    return pl.when(values.is_finite()).then(values).alias(name)


def finite_columns(frame: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """`names` through `finite`, computed once: every statistic and bin count reads them."""
    return frame.select(finite(name) for name in names)


def cumulative_counts(name: str, edges: list[float]) -> list[pl.Expr]:
    """Over a `finite_columns` frame: values, then values >= each edge (bin counts by
    difference, see `bin_counts`)."""
    values = pl.col(name)
    return [values.count(), *((values >= edge).sum() for edge in edges)]


def bin_counts(cumulative: list[int]) -> list[int]:
    """Per-bin counts from `cumulative_counts`' results."""
    steps = [*cumulative, 0]
    return [int(steps[i] - steps[i + 1]) for i in range(len(cumulative))]


def _edges(sample: np.ndarray, low: float, high: float, bins: int) -> list[float]:
    """Reference minimum, the sample's quantiles (as data values), and just above the maximum."""
    quantiles = np.linspace(0, 1, bins + 1)[1:-1]
    inner: list[float] = []
    if len(sample):
        inner = np.quantile(sample, quantiles, method="inverted_cdf").tolist()
    above = float(np.nextafter(high, np.inf))
    edges = {float(low), *inner} | ({above} if np.isfinite(above) else set())
    return sorted(edges)


def _sketch(sample: np.ndarray, count: int) -> list[float]:
    if not len(sample):
        return []
    return rounded(np.quantile(sample, quantile_grid(count), method="inverted_cdf"))


def _row_sample(
    frame: pl.DataFrame, names: list[str], options: ReferenceOptions
) -> dict[str, list[Any]]:
    rows = frame.select(names)
    if rows.height > options.row_sample_size:
        rows = rows.sample(n=options.row_sample_size, seed=options.seed)
    sample = rows.to_dict(as_series=False)
    for name, dtype in rows.schema.items():
        if dtype.is_float():  # the sample is most of the JSON: shorter numbers
            sample[name] = [_round(value) for value in sample[name]]
    return sample


def _round(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{ROW_DIGITS}g}")


def _text_columns(frame: pl.DataFrame, names: list[str]) -> list[str]:
    """String columns whose non-missing values are mostly distinct: free text."""
    found = []
    for name in names:
        if frame.schema[name] != pl.String:
            continue
        values = frame.get_column(name).drop_nulls()
        if len(values) >= 2 and values.n_unique() / len(values) >= TEXT_DISTINCT_SHARE:
            found.append(name)
    return found


def _category_counts(series: pl.Series, rows: int, top_k: int) -> CategoricalReference:
    counts = series.cast(pl.String).drop_nulls().alias("value").value_counts(name="count")
    top = counts.sort(["count", "value"], descending=[True, False]).head(top_k)
    categories = dict(zip(top["value"].to_list(), top["count"].to_list(), strict=True))
    present = int(counts["count"].sum())
    return CategoricalReference(
        rows=rows,
        missing=rows - present,
        categories=categories,
        other=present - sum(categories.values()),
    )


def _numeric_columns(
    frame: pl.DataFrame, names: list[str], options: ReferenceOptions
) -> dict[str, NumericReference]:
    if not names:
        return {}
    clean = finite_columns(frame, names)
    summary = clean.select(
        expression.alias(f"{i}:{stat}")
        for i, name in enumerate(names)
        for stat, expression in {
            "missing": pl.col(name).null_count(),
            "min": pl.col(name).min(),
            "max": pl.col(name).max(),
            "std": pl.col(name).std(),
        }.items()
    ).row(0, named=True)
    rows = frame.height
    sampled = clean
    if rows > options.sample_size:
        sampled = clean.sample(n=options.sample_size, seed=options.seed)
    samples = {name: sampled.get_column(name).drop_nulls().to_numpy() for name in names}
    edges = {
        name: _edges(samples[name], summary[f"{i}:min"], summary[f"{i}:max"], options.bins)
        if summary[f"{i}:min"] is not None
        else []
        for i, name in enumerate(names)
    }
    plans = {name: cumulative_counts(name, edges[name]) for name in names}
    counted = clean.select(
        expression.alias(f"{i}:{k}")
        for i, name in enumerate(names)
        for k, expression in enumerate(plans[name])
    ).row(0, named=True)
    return {
        name: NumericReference(
            rows=rows,
            missing=summary[f"{i}:missing"],
            edges=edges[name],
            counts=bin_counts([counted[f"{i}:{k}"] for k in range(len(plans[name]))]),
            std=summary[f"{i}:std"],
            quantiles=_sketch(samples[name], options.quantiles),
            sketched=len(samples[name]),
        )
        for i, name in enumerate(names)
    }


def build_reference(
    frame: pl.DataFrame,
    options: ReferenceOptions | None = None,
    prediction: str | None = None,
    columns: list[str] | None = None,
    predictions: ReferenceProfile | None = None,
) -> ReferenceProfile:
    """Profile `frame` (a training split) as the reference for drift.

    Args:
        frame: the reference rows; reserved columns (`__split__`, ...) are left out.
        options: bins, sample size, categories kept and seed (defaults: `ReferenceOptions()`).
        prediction: the column holding the model's predictions, profiled apart from the
            features so prediction drift can be judged on its own.
        columns: the feature columns to profile (default: every user column).
        predictions: the profile of the model's outputs on its validation split
            (`build_reference` of those outputs), kept for prediction drift.

    Returns:
        The profile; columns of types drift cannot compare (dates, lists, ...) are listed
        in `skipped` with their dtype.

    Raises:
        EmptyWindowError: `frame` has no rows.
        MissingColumnError: `columns` or `prediction` names a column `frame` lacks.
    """
    options = options or ReferenceOptions()
    if frame.height == 0:
        raise EmptyWindowError(
            "The reference data has no rows; build the reference from a non-empty split."
        )
    names = list(columns) if columns is not None else user_columns(frame)
    if prediction is not None and prediction not in names:
        names.append(prediction)
    require_columns(frame, names, "The drift reference")
    kinds = {name: column_kind(frame.schema[name]) for name in names}
    if prediction is not None and kinds[prediction] is None:
        raise InvalidDataError(
            f"The prediction column '{prediction}' is of type {frame.schema[prediction]}; "
            "drift compares numeric or categorical predictions only."
        )
    numeric = _numeric_columns(frame, [n for n in names if kinds[n] == "numeric"], options)
    profiled: dict[str, NumericReference | CategoricalReference] = {}
    for name in names:
        if kinds[name] == "numeric":
            profiled[name] = numeric[name]
        elif kinds[name] == "categorical":
            profiled[name] = _category_counts(frame.get_column(name), frame.height, options.top_k)
    features = [name for name in names if kinds[name] is not None and name != prediction]
    return ReferenceProfile(
        rows=frame.height,
        options=options,
        columns=profiled,
        prediction=prediction,
        skipped={name: str(frame.schema[name]) for name in names if kinds[name] is None},
        text_columns=_text_columns(frame, features),
        row_sample=_row_sample(frame, features, options),
        predictions=predictions,
    )
