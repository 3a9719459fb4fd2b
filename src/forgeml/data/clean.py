"""`data clean`: normalise, type, de-duplicate and filter a dataset version.

The steps always run in this order, each one optional:

0. `rename`, then `select` or `drop`: name, keep and remove columns (e.g. the column_1..N
   of a headerless file); every later step names the columns as renamed.
1. `text`: strip, Unicode NFKC, collapse whitespace runs, optional lowercase.
2. `replace`: per-column value mapping (e.g. Adult's test labels `>50K.` -> `>50K`).
3. `missing_markers`: values such as `?` become nulls (in string columns).
4. `cast` then `infer_types`: explicit casts, then String columns whose every non-null
   value is a number become Int64 / Float64.
5. `drop_duplicates`: exact duplicate rows (user columns only), first kept.
6. `near_duplicates`: MinHash LSH on one text column, first of each cluster kept.
7. `outliers`: rows outside IQR fences or a z-score threshold are dropped (nulls kept).
8. `missing`: drop rows or impute (mean, median, mode, constant).

De-duplication and outlier filtering run before imputation so that duplicated or
extreme rows do not bias the statistics used to fill gaps. Statistics (means, quantiles,
modes) come from the `train` rows when a `__split__` column exists, so validation and
test rows never leak into them. Mean and median imputation of an integer column rounds
the statistic (half to even) so the column keeps its type. Reserved columns are carried
through untouched and never compared. An empty recipe normalises text, turns `?` and ""
into nulls and infers numeric columns; it drops no rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from forgeml.core.errors import InvalidDataError
from forgeml.data._dedup import near_duplicate_keep
from forgeml.data._frame import (
    RESERVED_COLUMNS,
    SPLIT_COLUMN,
    TransformOutput,
    require_columns,
    user_columns,
)

CastType = Literal["int", "float", "str", "bool", "date", "datetime"]
Strategy = Literal["none", "drop", "mean", "median", "mode", "constant"]
Scalar = str | int | float | bool | dt.date | dt.datetime


class TextParams(BaseModel):
    """How string columns are normalised."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str] | None = Field(
        default=None, description="String columns to normalise; default every String column."
    )
    strip: bool = Field(default=True, description="Remove leading and trailing whitespace.")
    nfkc: bool = Field(default=True, description="Apply Unicode NFKC normalisation.")
    collapse_spaces: bool = Field(
        default=True, description="Replace each run of whitespace inside a value by one space."
    )
    lowercase: bool = Field(default=False, description="Lowercase every value.")


class MissingRule(BaseModel):
    """What to do with the nulls of a column."""

    model_config = ConfigDict(extra="forbid")

    strategy: Strategy = Field(
        default="none",
        description="none, drop (rows), mean or median (numeric only), mode, or constant.",
    )
    value: Scalar | None = Field(default=None, description="The fill value for `constant`.")

    @model_validator(mode="after")
    def _value_only_for_constant(self) -> MissingRule:
        if self.strategy == "constant" and self.value is None:
            raise ValueError("strategy 'constant' needs a `value`")
        if self.strategy != "constant" and self.value is not None:
            raise ValueError(f"`value` is only used by strategy 'constant', not '{self.strategy}'")
        return self


class MissingParams(MissingRule):
    """The default rule for every column with nulls, plus per-column overrides."""

    columns: dict[str, MissingRule] = Field(
        default_factory=dict, description="Per-column rules that override the default."
    )


class NearDuplicateParams(BaseModel):
    """Near-duplicate removal on one text column (MinHash LSH over shingles)."""

    model_config = ConfigDict(extra="forbid")

    column: str = Field(description="The text column to compare.")
    threshold: float = Field(
        default=0.9, gt=0.0, le=1.0, description="Jaccard similarity that counts as duplicate."
    )
    num_perm: int = Field(default=64, ge=16, le=1024, description="MinHash signature length.")
    shingle: Literal["word", "char"] = Field(default="word", description="Shingle unit.")
    n: int | None = Field(
        default=None, ge=1, le=64, description="Shingle length; default 2 words or 5 chars."
    )
    seed: int = Field(default=1, ge=0, description="Seed of the MinHash permutations.")


class OutlierParams(BaseModel):
    """Drop rows whose value in any listed numeric column is an outlier."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str] = Field(min_length=1, description="Numeric columns to check.")
    method: Literal["iqr", "zscore"] = Field(default="iqr", description="iqr or zscore.")
    factor: float = Field(default=1.5, gt=0, description="IQR fence multiplier (iqr).")
    threshold: float = Field(default=3.0, gt=0, description="Absolute z-score limit (zscore).")


class CleanParams(BaseModel):
    """A clean recipe (`forgeml data clean REF --recipe FILE`)."""

    model_config = ConfigDict(extra="forbid")

    rename: dict[str, str] = Field(
        default_factory=dict,
        description="Column renames, {old: new}; they run first, so later steps use the new names.",
    )
    select: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Keep only these columns, in this order (named as renamed).",
    )
    drop: list[str] = Field(
        default_factory=list, description="Remove these columns (named as renamed)."
    )
    text: TextParams | None = Field(
        default_factory=TextParams, description="Text normalisation; null turns it off."
    )
    replace: dict[str, dict[Scalar, Scalar | None]] = Field(
        default_factory=dict, description="Per-column value mapping, {column: {old: new}}."
    )
    missing_markers: list[str] = Field(
        default_factory=lambda: ["?", ""], description="String values that mean missing."
    )
    cast: dict[str, CastType] = Field(
        default_factory=dict, description="Explicit casts: int, float, str, bool, date, datetime."
    )
    infer_types: bool = Field(
        default=True, description="Turn String columns holding only numbers into Int64/Float64."
    )
    on_cast_error: Literal["fail", "null"] = Field(
        default="fail", description="fail: raise on an uncastable value; null: make it null."
    )
    drop_duplicates: bool = Field(default=False, description="Drop exact duplicate rows.")
    near_duplicates: NearDuplicateParams | None = Field(
        default=None, description="Drop near-duplicate texts."
    )
    outliers: OutlierParams | None = Field(default=None, description="Drop outlier rows.")
    missing: MissingParams = Field(
        default_factory=MissingParams, description="Drop or impute missing values."
    )

    @model_validator(mode="after")
    def _no_reserved_columns(self) -> CleanParams:
        shaped = [*self.rename, *self.rename.values(), *(self.select or []), *self.drop]
        reserved = [name for name in shaped + self.named_columns() if name in RESERVED_COLUMNS]
        if reserved:
            raise ValueError(f"reserved column '{reserved[0]}' cannot be changed by clean")
        return self

    @model_validator(mode="after")
    def _columns_named_once(self) -> CleanParams:
        if self.select is not None and self.drop:
            raise ValueError("give select or drop, not both")
        new_names = list(self.rename.values())
        for what, given in (("rename", new_names), ("select", self.select), ("drop", self.drop)):
            names = given or []
            if any(not name.strip() for name in names):
                raise ValueError(f"{what} names an empty column name")
            repeated = next((name for name in names if names.count(name) > 1), None)
            if repeated is not None:
                raise ValueError(f"{what} names the column '{repeated}' twice")
        return self

    def named_columns(self) -> list[str]:
        """Every column the later steps name (not rename/select/drop), without repeats."""
        names = list(self.text.columns or []) if self.text else []
        names += [*self.replace, *self.cast, *self.missing.columns]
        if self.near_duplicates:
            names.append(self.near_duplicates.column)
        if self.outliers:
            names += self.outliers.columns
        return list(dict.fromkeys(names))


def apply(frame: pl.DataFrame, params: CleanParams) -> TransformOutput:
    """Run the clean recipe on a frame.

    Args:
        frame: the dataset version's rows.
        params: the recipe.

    Returns:
        The cleaned rows (same order, reserved columns kept) and a report: `rows_in`,
        `rows_out`, and for each step that ran what it changed (`normalized`, `replaced`,
        `markers_to_null`, `cast`, `cast_to_null`, `inferred`: per column; `duplicates`,
        `near_duplicates`, `outlier_rows`, `dropped_missing`: row counts; `outliers`,
        `outlier_bounds`, `imputed` (strategy, value, count): per column;
        `statistics_from`: "train" or "all").

    Raises:
        MissingColumnError: the recipe names a column the data does not have.
        InvalidDataError: a cast fails, a step does not fit a column's type, or a rename
            gives two columns one name.
    """
    report: dict[str, Any] = {"rows_in": frame.height}
    frame = _shape_columns(frame, params, report)
    require_columns(frame, params.named_columns(), "The clean recipe")
    if params.text is not None:
        frame = _normalize_text(frame, params.text, report)
    frame = _replace_values(frame, params.replace, report)
    frame = _markers_to_null(frame, params.missing_markers, report)
    frame = _cast_columns(frame, params.cast, params.on_cast_error, report)
    if params.infer_types:
        frame = _infer_numeric(frame, exclude=set(params.cast), report=report)
    if params.drop_duplicates:
        frame = _drop_duplicates(frame, report)
    if params.near_duplicates is not None:
        frame = _drop_near_duplicates(frame, params.near_duplicates, report)
    if params.outliers is not None:
        frame = _drop_outliers(frame, params.outliers, report)
    frame = _handle_missing(frame, params.missing, report)
    report["rows_out"] = frame.height
    return TransformOutput(frame=frame, report=report)


def _shape_columns(
    frame: pl.DataFrame, params: CleanParams, report: dict[str, Any]
) -> pl.DataFrame:
    """The rename, select and drop steps."""
    if params.rename:
        require_columns(frame, list(params.rename), "The clean recipe's rename")
        names = [params.rename.get(name, name) for name in frame.columns]
        clash = next((name for name in names if names.count(name) > 1), None)
        if clash is not None:
            raise InvalidDataError(
                f"The clean recipe's rename gives two columns the name '{clash}'; rename the "
                "existing one too, or choose another name."
            )
        frame = frame.rename(params.rename)
        report["renamed"] = dict(params.rename)
    removed: list[str] = []
    if params.select is not None:
        require_columns(frame, params.select, "The clean recipe's select")
        removed = [name for name in user_columns(frame) if name not in params.select]
        reserved = [name for name in frame.columns if name in RESERVED_COLUMNS]
        frame = frame.select([*params.select, *reserved])
    elif params.drop:
        require_columns(frame, params.drop, "The clean recipe's drop")
        removed = list(params.drop)
        frame = frame.drop(removed)
    if not user_columns(frame):
        raise InvalidDataError("The clean recipe's drop removes every column; keep at least one.")
    if removed:
        report["dropped_columns"] = removed
    return frame


def _drop_near_duplicates(
    frame: pl.DataFrame, params: NearDuplicateParams, report: dict[str, Any]
) -> pl.DataFrame:
    column = params.column
    if frame.schema[column] != pl.String:
        raise InvalidDataError(
            f"near_duplicates.column '{column}' is {frame.schema[column]}, not text; "
            "name a String column."
        )
    n = params.n if params.n is not None else (2 if params.shingle == "word" else 5)
    keep = near_duplicate_keep(
        frame[column],
        threshold=params.threshold,
        num_perm=params.num_perm,
        kind=params.shingle,
        n=n,
        seed=params.seed,
    )
    report["near_duplicates"] = frame.height - int(keep.sum())
    return frame.filter(keep)


# --- steps -------------------------------------------------------------------------------

_DTYPES: dict[str, pl.DataType] = {
    "int": pl.Int64(),
    "float": pl.Float64(),
    "str": pl.String(),
    "bool": pl.Boolean(),
    "date": pl.Date(),
    "datetime": pl.Datetime("us"),
}
_BOOL_WORDS = {
    **dict.fromkeys(("true", "t", "yes", "y", "1"), True),
    **dict.fromkeys(("false", "f", "no", "n", "0"), False),
}


def _text_expr(column: str, params: TextParams, non_ascii: bool, spaced: bool) -> pl.Expr:
    expr = pl.col(column)
    # Each step is skipped only when it cannot change a value (NFKC leaves ASCII alone and
    # may itself create spaces): same result, at a fraction of the cost on clean columns.
    if params.nfkc and non_ascii:
        expr = expr.str.normalize("NFKC")
    if params.strip and (non_ascii or spaced):
        expr = expr.str.strip_chars()
    if params.collapse_spaces and (non_ascii or spaced):
        expr = expr.str.replace_all(r"\s+", " ")
    if params.lowercase:
        expr = expr.str.to_lowercase()
    return expr


def _normalize_text(
    frame: pl.DataFrame, params: TextParams, report: dict[str, Any]
) -> pl.DataFrame:
    if params.columns is None:
        columns = [c for c in user_columns(frame) if frame.schema[c] == pl.String]
    else:
        columns = params.columns
        for column in columns:
            if frame.schema[column] != pl.String:
                raise InvalidDataError(
                    f"text.columns names '{column}', which is {frame.schema[column]}, not text; "
                    "remove it from text.columns."
                )
    if not columns or frame.height == 0:
        return frame
    probe = frame.select(
        *[
            (pl.col(c).str.len_bytes() != pl.col(c).str.len_chars()).any().alias(f"u:{c}")
            for c in columns
        ],
        # leading or trailing whitespace, a run of it, or any whitespace but a plain space
        *[pl.col(c).str.contains(r"^\s|\s$|\s\s|[^\S ]").any().alias(f"s:{c}") for c in columns],
    ).row(0, named=True)
    new = frame.select(
        _text_expr(c, params, bool(probe[f"u:{c}"]), bool(probe[f"s:{c}"])) for c in columns
    )
    changed = {c: int((new[c] != frame[c]).sum()) for c in columns}
    report["normalized"] = {c: n for c, n in changed.items() if n}
    return frame.with_columns(new)


def _parse_text(series: pl.Series, dtype: pl.DataType) -> pl.Series:
    """String values parsed as `dtype`; a value that does not parse becomes null."""
    if dtype == pl.Boolean:
        words = series.str.to_lowercase()
        return words.replace_strict(_BOOL_WORDS, default=None, return_dtype=pl.Boolean)
    try:
        if dtype == pl.Date:
            return series.str.to_date(strict=False)
        if isinstance(dtype, pl.Datetime):
            return series.str.to_datetime(strict=False, time_unit=dtype.time_unit or "us")
    except pl.exceptions.ComputeError:
        # No date format could be inferred from the values: none of them converts.
        return pl.Series(series.name, [None] * len(series), dtype=dtype)
    return series.cast(dtype, strict=False)


def _convert_scalar(value: Any, dtype: pl.DataType, what: str) -> Any:
    """`value` as a value of `dtype`, or InvalidDataError when it does not fit exactly.

    Text is parsed (so "5" fits an Int64 column): recipes stored as JSON lineage turn
    mapping keys and dates into strings, and a rebuild must read them back the same.
    """
    if value is None:
        return None
    if dtype == pl.String:
        return value if isinstance(value, str) else str(value)
    try:
        if isinstance(value, str):
            converted = _parse_text(pl.Series([value]), dtype)[0]
        else:
            converted = pl.Series([value]).cast(dtype, strict=True)[0]
            converted = converted if converted == value else None
    except pl.exceptions.PolarsError:
        converted = None
    if converted is None:
        raise InvalidDataError(
            f"{what} {value!r} does not fit the column's type {dtype}; give a value of that type."
        )
    return converted


def _replace_values(
    frame: pl.DataFrame, mapping: dict[str, dict[Any, Any]], report: dict[str, Any]
) -> pl.DataFrame:
    counts: dict[str, int] = {}
    for column, pairs in mapping.items():
        dtype = frame.schema[column]
        what = f"replace.{column}:"
        old = pl.Series([_convert_scalar(k, dtype, what) for k in pairs], dtype=dtype)
        new = pl.Series([_convert_scalar(v, dtype, what) for v in pairs.values()], dtype=dtype)
        counts[column] = int(frame[column].is_in(old).sum())
        frame = frame.with_columns(pl.col(column).replace(old, new))
    if mapping:
        report["replaced"] = counts
    return frame


def _markers_to_null(
    frame: pl.DataFrame, markers: list[str], report: dict[str, Any]
) -> pl.DataFrame:
    columns = [c for c in user_columns(frame) if frame.schema[c] == pl.String]
    if not markers or not columns:
        return frame
    # Equality tests OR-ed together run several times faster than `is_in` for a few markers.
    new = frame.select(
        pl.when(pl.any_horizontal(pl.col(c) == m for m in markers))
        .then(None)
        .otherwise(pl.col(c))
        .alias(c)
        for c in columns
    )
    counts = {c: new[c].null_count() - frame[c].null_count() for c in columns}
    report["markers_to_null"] = {c: n for c, n in counts.items() if n}
    return frame.with_columns(new[c] for c, n in counts.items() if n)


def _cast_series(series: pl.Series, target: str) -> pl.Series:
    dtype = _DTYPES[target]
    if series.dtype == dtype:
        return series
    if series.dtype == pl.String:
        return _parse_text(series, dtype)
    try:
        return series.cast(dtype, strict=False)
    except pl.exceptions.InvalidOperationError:
        raise InvalidDataError(
            f"Column '{series.name}' of type {series.dtype} cannot be cast to {target}; "
            "choose another type in cast."
        ) from None


def _cast_columns(
    frame: pl.DataFrame, casts: dict[str, CastType], on_error: str, report: dict[str, Any]
) -> pl.DataFrame:
    nulled: dict[str, int] = {}
    for column, target in casts.items():
        source = frame[column]
        result = _cast_series(source, target)
        failed = source.is_not_null() & result.is_null()
        if source.dtype.is_float() and target == "int":
            # Casting 2.5 to an integer would silently truncate it.
            failed = failed | (result.is_not_null() & (result.cast(source.dtype) != source))
        if failed.any():
            if on_error == "fail":
                bad = source.filter(failed)[0]
                raise InvalidDataError(
                    f"Column '{column}' cannot be cast to {target}: value {bad!r} does not "
                    "convert; fix it with replace, or set on_cast_error: null to make it null."
                )
            nulled[column] = int(failed.sum())
            result = pl.select(pl.when(failed).then(None).otherwise(result)).to_series()
        frame = frame.with_columns(result.alias(column))
    if casts:
        report["cast"] = {c: str(frame.schema[c]) for c in casts}
    if nulled:
        report["cast_to_null"] = nulled
    return frame


def _infer_numeric(frame: pl.DataFrame, exclude: set[str], report: dict[str, Any]) -> pl.DataFrame:
    strings = [c for c in user_columns(frame) if frame.schema[c] == pl.String and c not in exclude]
    if not strings:
        return frame
    # The first non-null value rules most text columns out before any whole-column cast.
    first_is_number = frame.select(
        pl.col(c).drop_nulls().first().cast(pl.Float64, strict=False).is_not_null() for c in strings
    ).row(0)
    inferred: dict[str, pl.Series] = {}
    for column, maybe in zip(strings, first_is_number, strict=True):
        source = frame[column]
        for dtype in (pl.Int64, pl.Float64) if maybe else ():
            result = source.cast(dtype, strict=False)
            if result.null_count() == source.null_count():
                inferred[column] = result
                break
    report["inferred"] = {c: str(series.dtype) for c, series in inferred.items()}
    return frame.with_columns(inferred.values())


def _drop_duplicates(frame: pl.DataFrame, report: dict[str, Any]) -> pl.DataFrame:
    columns = user_columns(frame)
    # Row hashes find the candidates fast; only rows sharing a hash are compared exactly,
    # so a hash collision can never drop a row. (Several times faster than `unique`.)
    candidates = frame.select(columns).hash_rows(seed=0).is_duplicated() if columns else None
    if candidates is None or not candidates.any():
        report["duplicates"] = 0
        return frame
    positions = candidates.arg_true()
    repeats = frame.select(columns)[positions].select(pl.struct(columns).is_first_distinct())
    dropped = positions.filter(~repeats.to_series())
    report["duplicates"] = len(dropped)
    keep = pl.repeat(True, frame.height, dtype=pl.Boolean, eager=True).scatter(dropped, False)
    return frame.filter(keep)


def _fit_rows(frame: pl.DataFrame, report: dict[str, Any]) -> pl.DataFrame:
    """The rows statistics are computed from: the train split when there is one."""
    if SPLIT_COLUMN in frame.columns:
        train = frame.filter(pl.col(SPLIT_COLUMN) == "train")
        if train.height:
            report["statistics_from"] = "train"
            return train
    report["statistics_from"] = "all"
    return frame


def _require_numeric(frame: pl.DataFrame, column: str, what: str, fix: str) -> None:
    dtype = frame.schema[column]
    if not dtype.is_numeric():
        raise InvalidDataError(f"{what} needs a numeric column, but '{column}' is {dtype}; {fix}.")


def _bounds(fit: pl.DataFrame, params: OutlierParams) -> dict[str, tuple[float, float] | None]:
    """The [low, high] range kept for each column, or None when it cannot be computed."""
    columns = list(dict.fromkeys(params.columns))
    if params.method == "iqr":
        stats = [(pl.col(c).quantile(0.25), pl.col(c).quantile(0.75)) for c in columns]
    else:
        stats = [(pl.col(c).mean(), pl.col(c).std()) for c in columns]
    row = fit.select(
        expr.alias(f"{i}:{c}")
        for c, pair in zip(columns, stats, strict=True)
        for i, expr in enumerate(pair)
    ).row(0, named=True)
    bounds: dict[str, tuple[float, float] | None] = {}
    for column in columns:
        first, second = row[f"0:{column}"], row[f"1:{column}"]
        if first is None or second is None or (params.method == "zscore" and second == 0):
            bounds[column] = None
        elif params.method == "iqr":
            spread = params.factor * (second - first)
            bounds[column] = (float(first - spread), float(second + spread))
        else:
            spread = params.threshold * second
            bounds[column] = (float(first - spread), float(first + spread))
    return bounds


def _drop_outliers(
    frame: pl.DataFrame, params: OutlierParams, report: dict[str, Any]
) -> pl.DataFrame:
    for column in params.columns:
        _require_numeric(frame, column, "outliers", "remove it from outliers.columns")
    bounds = _bounds(_fit_rows(frame, report), params)
    outside = {
        c: ((pl.col(c) < limits[0]) | (pl.col(c) > limits[1])).fill_null(False)
        for c, limits in bounds.items()
        if limits is not None
    }
    counts = (
        frame.select(expr.sum().alias(c) for c, expr in outside.items()).row(0, named=True)
        if outside
        else {}
    )
    kept = frame.filter(~pl.any_horizontal(list(outside.values()))) if outside else frame
    report["outliers"] = {c: int(counts.get(c) or 0) for c in bounds}
    report["outlier_rows"] = frame.height - kept.height
    report["outlier_bounds"] = {c: list(b) for c, b in bounds.items() if b is not None}
    return kept


_STATISTICS = {
    "mean": lambda col: col.mean(),
    "median": lambda col: col.median(),
    # Ties go to the smallest value so that the choice does not depend on hashing.
    "mode": lambda col: col.drop_nulls().mode().sort().first(),
}


def _text_mode(values: pl.Series) -> Any:
    """The most frequent value of a String column, ties to the smallest (as `_STATISTICS`)."""
    values = values.drop_nulls()
    return _mode_by_hash(values, values.hash(seed=0)) if len(values) else None


def _mode_by_hash(values: pl.Series, hashes: pl.Series) -> Any:
    """`_text_mode` of null-free `values`, counting their `hashes` and few strings.

    Equal values hash alike, so a value occurs at most as often as its hash: counting the
    u64 hashes bounds every value's count, and only the rows of the most frequent hashes
    are grouped by value. When a collision made a hash look more frequent than any of its
    values, every hash at least as frequent as the best exact count is grouped again,
    which includes every value that could beat it (ties too).
    """
    counts = hashes.rename("hash").value_counts(name="count")
    threshold = int(counts.select(pl.col("count").max()).item())
    while threshold > 1:
        chosen = counts.filter(pl.col("count") >= threshold).get_column("hash")
        rows = values.filter(hashes.is_in(chosen.implode()))
        exact = rows.to_frame("value").group_by("value").len(name="count")
        best = exact.top_k(1, by=["count", "value"], reverse=[False, True]).row(0, named=True)
        if best["count"] == threshold:
            return best["value"]
        threshold = best["count"]
    return values.min()  # every value once: all tie


def _fill_values(fit: pl.DataFrame, rules: dict[str, MissingRule]) -> dict[str, Any]:
    """The value that fills each column's nulls; a column with nothing to fill from is left out."""
    texts = [c for c, r in rules.items() if r.strategy == "mode" and fit.schema[c] == pl.String]
    computed = [c for c, rule in rules.items() if rule.strategy in _STATISTICS and c not in texts]
    stats = (
        fit.select(_STATISTICS[rules[c].strategy](pl.col(c)).alias(c) for c in computed).row(
            0, named=True
        )
        if computed
        else {}
    )
    stats |= {c: _text_mode(fit.get_column(c)) for c in texts}
    values: dict[str, Any] = {}
    for column, rule in rules.items():
        dtype = fit.schema[column]
        if rule.strategy == "constant":
            values[column] = _convert_scalar(rule.value, dtype, f"missing value for '{column}':")
        elif stats[column] is None:
            continue
        elif rule.strategy == "mode":
            values[column] = stats[column]
        else:
            # Integer columns keep their type: the statistic is rounded (half to even).
            stat = float(stats[column])
            values[column] = round(stat) if dtype.is_integer() else stat
    return values


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float):
        return value
    return value.isoformat() if isinstance(value, dt.date | dt.time) else str(value)


def _handle_missing(
    frame: pl.DataFrame, params: MissingParams, report: dict[str, Any]
) -> pl.DataFrame:
    default = MissingRule(strategy=params.strategy, value=params.value)
    rules = {c: params.columns.get(c, default) for c in user_columns(frame)}
    for column, rule in rules.items():
        explicit = column in params.columns
        if rule.strategy in ("mean", "median") and (explicit or frame[column].null_count()):
            where = f"missing.columns.{column}" if explicit else "missing (the default)"
            fix = "use mode or constant" + ("" if explicit else " for it under missing.columns")
            _require_numeric(frame, column, f"{where} strategy '{rule.strategy}'", fix)
    dropping = [c for c, rule in rules.items() if rule.strategy == "drop"]
    if dropping:
        kept = frame.drop_nulls(subset=dropping)
        report["dropped_missing"] = frame.height - kept.height
        frame = kept
    filling = [
        c
        for c, rule in rules.items()
        if rule.strategy not in ("none", "drop") and frame[c].null_count()
    ]
    if not filling:
        return frame
    values = _fill_values(_fit_rows(frame, report), {c: rules[c] for c in filling})
    report["imputed"] = {
        c: {"strategy": rules[c].strategy, "value": _json_value(v), "count": frame[c].null_count()}
        for c, v in values.items()
    }
    return frame.with_columns(
        pl.col(c).fill_null(pl.lit(v, dtype=frame.schema[c])) for c, v in values.items()
    )
