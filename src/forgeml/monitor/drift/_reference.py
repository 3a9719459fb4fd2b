"""The reference profile: a training split summarised once, kept to compare windows with.

Per numeric column: the counts of quantile bins whose inner edges are the reference's
minimum, its quantiles and a hair above its maximum (so values beyond the reference's
range fall in bins of their own, and a mass point such as a constant gets its own bin),
the standard deviation, and a seeded sample of values for KS and Wasserstein. Per
categorical column (text, categorical, boolean): the counts of its `top_k` categories and
of the rest. Missing values (null, NaN, infinite) are counted, not binned.

Building reads the numeric columns once to make them finite Float64, then runs two
`select`s over that: one for the counts of missing values, minima, maxima and deviations,
one for the bin counts (the edges come from the sample); plus one value count per
categorical column.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from forgeml.core.errors import EmptyWindowError, InvalidDataError
from forgeml.data._frame import require_columns, user_columns
from forgeml.monitor.drift._config import ReferenceOptions

FORMAT = 1  # bump when the JSON shape changes
Kind = Literal["numeric", "categorical"]


class NumericReference(BaseModel):
    """A numeric column of the reference: bins, deviation and a sample."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["numeric"] = "numeric"
    rows: int
    missing: int = Field(description="Null, NaN or infinite values.")
    edges: list[float] = Field(description="Inner bin edges, increasing.")
    counts: list[int] = Field(description="Values per bin: below edges[0], ..., from edges[-1].")
    std: float | None = Field(description="Standard deviation (None with under two values).")
    sample: list[float] = Field(description="A seeded sample of the finite values.")


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
            InvalidDataError: the text is not a reference profile.
        """
        from pydantic import ValidationError

        try:
            return cls.model_validate_json(text)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top level)"
            raise InvalidDataError(
                f"Not a drift reference profile: {where}: {first['msg']}."
            ) from None


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
            sample=samples[name].tolist(),
        )
        for i, name in enumerate(names)
    }


def build_reference(
    frame: pl.DataFrame,
    options: ReferenceOptions | None = None,
    prediction: str | None = None,
    columns: list[str] | None = None,
) -> ReferenceProfile:
    """Profile `frame` (a training split) as the reference for drift.

    Args:
        frame: the reference rows; reserved columns (`__split__`, ...) are left out.
        options: bins, sample size, categories kept and seed (defaults: `ReferenceOptions()`).
        prediction: the column holding the model's predictions, profiled apart from the
            features so prediction drift can be judged on its own.
        columns: the feature columns to profile (default: every user column).

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
    return ReferenceProfile(
        rows=frame.height,
        options=options,
        columns=profiled,
        prediction=prediction,
        skipped={name: str(frame.schema[name]) for name in names if kinds[name] is None},
    )
