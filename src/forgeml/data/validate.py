"""`data validate`: check a dataset version against expectations, quarantining failing rows.

Expectations are YAML (`forgeml data validate REF --expectations FILE.yaml`):

    columns:
      age: {dtype: int, nullable: false, ge: 17, le: 90}
      sex: {isin: [Male, Female]}
      email: {regex: '^[^@]+@[^@]+$'}
    strict: false   # true: no columns other than these (and the reserved ones)

Validation runs pandera's polars backend twice. The first schema holds only column-level
expectations (dtype, and no unknown columns when strict): those failures are not about
particular rows, so they raise `InvalidDataError` instead of quarantining everything.
The second schema holds the row checks; pandera's `failure_cases` gives the position of
each failing row (`index`), and every row with at least one failure goes to the
`quarantine` side frame with a `__reason__` listing all its failed checks. Nulls pass
every check except `nullable: false`; `unique: true` fails every row whose value occurs
more than once (pandera's rule: none of the copies is preferred).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from forgeml.core.errors import InvalidDataError
from forgeml.data._frame import RESERVED_COLUMNS, TransformOutput, require_columns

REASON_COLUMN = "__reason__"

DType = Literal["int", "float", "number", "str", "bool", "date", "datetime"]
Bound = int | float | dt.datetime | dt.date
Member = str | int | float | bool

_DTYPE_TESTS: dict[str, Callable[[pl.DataType], bool]] = {
    "int": lambda d: d.is_integer(),
    "float": lambda d: d.is_float(),
    "number": lambda d: d.is_numeric(),
    "str": lambda d: d == pl.String,
    "bool": lambda d: d == pl.Boolean,
    "date": lambda d: d == pl.Date,
    "datetime": lambda d: isinstance(d, pl.Datetime),
}
_BOUNDS = ("ge", "gt", "le", "lt")


class ColumnExpectation(BaseModel):
    """What one column must satisfy; every key is optional."""

    model_config = ConfigDict(extra="forbid")

    dtype: DType | None = Field(
        default=None, description="int, float, number, str, bool, date or datetime (any width)."
    )
    nullable: bool = Field(default=True, description="false: a null value fails the row.")
    unique: bool = Field(default=False, description="true: a value occurring twice fails both.")
    ge: Bound | None = Field(default=None, description="Value must be >= this.")
    gt: Bound | None = Field(default=None, description="Value must be > this.")
    le: Bound | None = Field(default=None, description="Value must be <= this.")
    lt: Bound | None = Field(default=None, description="Value must be < this.")
    isin: list[Member] | None = Field(default=None, min_length=1, description="Allowed values.")
    notin: list[Member] | None = Field(default=None, min_length=1, description="Forbidden values.")
    regex: str | None = Field(
        default=None, description="Pattern each text must match from its start (re.match)."
    )
    min_length: int | None = Field(default=None, ge=0, description="Shortest allowed text.")
    max_length: int | None = Field(default=None, ge=0, description="Longest allowed text.")

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"invalid regular expression: {error}") from None
        return value

    @model_validator(mode="after")
    def _lengths_ordered(self) -> ColumnExpectation:
        low, high = self.min_length, self.max_length
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_length {low} is greater than max_length {high}")
        return self


class Expectations(BaseModel):
    """A set of expectations (`forgeml data validate REF --expectations FILE.yaml`)."""

    model_config = ConfigDict(extra="forbid")

    columns: dict[str, ColumnExpectation] = Field(
        default_factory=dict, description="Expectations per column name."
    )
    strict: bool = Field(
        default=False, description="true: the data may have no other (non-reserved) columns."
    )

    @field_validator("columns")
    @classmethod
    def _no_reserved(cls, value: dict[str, ColumnExpectation]) -> dict[str, ColumnExpectation]:
        for name in value:
            if name in RESERVED_COLUMNS:
                raise ValueError(f"reserved column '{name}' cannot have expectations")
        return value


def apply(frame: pl.DataFrame, params: Expectations) -> TransformOutput:
    """Validate a frame; rows that fail any check go to the `quarantine` side frame.

    Args:
        frame: the dataset version's rows.
        params: the expectations.

    Returns:
        `frame`: the rows that pass every check, in order; `side_frames["quarantine"]`:
        the failing rows with a `__reason__` column naming every check each one failed;
        `report`: `{"rows", "passed", "failed", "checks", "failures": {check: rows}}`.

    Raises:
        MissingColumnError: an expected column is absent.
        InvalidDataError: a column-level expectation fails (wrong dtype, unexpected
            column under strict) or a check does not fit the column's type.
    """
    import pandera.polars as pa
    from pandera.config import ValidationDepth, config_context

    require_columns(frame, list(params.columns), "An expectation")
    for name, expectation in params.columns.items():
        _check_fits(frame, name, expectation)
    labelled = {name: _row_checks(name, exp) for name, exp in params.columns.items()}
    # Pin the settings pandera would otherwise read from PANDERA_* environment variables.
    with config_context(validation_enabled=True, validation_depth=ValidationDepth.SCHEMA_AND_DATA):
        _raise_column_failures(frame, _column_schema(pa, params), params)
        failures = _failure_cases(frame, _row_schema(pa, params, labelled))
    order = [label for checks in labelled.values() for label, _ in checks]
    return _split_rows(frame, failures, order)


def _label(column: str, key: str, value: Any) -> str:
    return f"{column}: {key} {value}"


def _row_checks(column: str, exp: ColumnExpectation) -> list[tuple[str, Any]]:
    """(label, pandera Check or None) for each row-level expectation, in a fixed order."""
    import pandera.polars as pa

    checks: list[tuple[str, Any]] = []
    if not exp.nullable:
        checks.append((f"{column}: not null", None))
    if exp.unique:
        checks.append((f"{column}: unique", None))
    for key in _BOUNDS:
        value = getattr(exp, key)
        if value is not None:
            label = _label(column, key, value)
            checks.append((label, getattr(pa.Check, key)(value, error=label)))
    for key, make in (("isin", pa.Check.isin), ("notin", pa.Check.notin)):
        values = getattr(exp, key)
        if values is not None:
            checks.append(
                (_label(column, key, values), make(values, error=_label(column, key, values)))
            )
    if exp.regex is not None:
        label = _label(column, "regex", repr(exp.regex))
        checks.append((label, pa.Check.str_matches(exp.regex, error=label)))
    for key, argument in (("min_length", "min_value"), ("max_length", "max_value")):
        value = getattr(exp, key)
        if value is not None:
            label = _label(column, key, value)
            checks.append((label, pa.Check.str_length(**{argument: value}, error=label)))
    return checks


def _check_fits(frame: pl.DataFrame, column: str, exp: ColumnExpectation) -> None:
    """Raise when a check cannot apply to the column's type (rather than failing every row)."""
    dtype = frame.schema[column]
    for key in _BOUNDS:
        value = getattr(exp, key)
        temporal = isinstance(value, dt.date)
        if value is not None and not (dtype.is_temporal() if temporal else dtype.is_numeric()):
            kind = "date" if temporal else "numeric"
            raise InvalidDataError(
                f"Expectation '{_label(column, key, value)}' needs a {kind} column, but "
                f"'{column}' is {dtype}; cast the column first or change the expectation."
            )
    for key in ("isin", "notin"):
        members = getattr(exp, key) or []
        if dtype == pl.String and any(not isinstance(m, str) for m in members):
            raise InvalidDataError(
                f"Expectation '{_label(column, key, members)}' lists non-text values for the "
                f"text column '{column}'; quote them in the YAML."
            )
        if dtype.is_numeric() and any(isinstance(m, str) for m in members):
            raise InvalidDataError(
                f"Expectation '{_label(column, key, members)}' lists text values for the "
                f"{dtype} column '{column}'; list numbers instead."
            )
    text_keys = [k for k in ("regex", "min_length", "max_length") if getattr(exp, k) is not None]
    if text_keys and dtype != pl.String:
        raise InvalidDataError(
            f"Expectation '{column}: {text_keys[0]}' needs a text column, but '{column}' is "
            f"{dtype}; remove it or cast the column to str first."
        )


def _column_schema(pa: Any, params: Expectations) -> Any:
    columns = {
        name: pa.Column(None, nullable=True, checks=_dtype_checks(pa, name, exp.dtype))
        for name, exp in params.columns.items()
    }
    for name in RESERVED_COLUMNS:
        columns.setdefault(name, pa.Column(None, nullable=True, required=False))
    return pa.DataFrameSchema(columns, strict=params.strict)


def _dtype_checks(pa: Any, column: str, dtype: DType | None) -> list[Any]:
    if dtype is None:
        return []
    test = _DTYPE_TESTS[dtype]
    # A whole-column check (it returns one bool): any integer width is an int, and so on.
    return [
        pa.Check(
            lambda data: test(data.lazyframe.collect_schema()[data.key]),
            error=_label(column, "dtype", dtype),
        )
    ]


def _raise_column_failures(frame: pl.DataFrame, schema: Any, params: Expectations) -> None:
    import pandera.errors

    try:
        schema.validate(frame, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        first = errors.failure_cases.row(0, named=True)
        if first["column"] is None:  # pandera's "column_in_schema": an unexpected column
            raise InvalidDataError(
                f"Column '{first['failure_case']}' is not in the expectations and strict: true "
                "allows no other columns; add it under columns or set strict: false."
            ) from None
        column = first["column"]
        raise InvalidDataError(
            f"Column '{column}' is {frame.schema[column]}, but the expectations require "
            f"dtype {params.columns[column].dtype}; cast it first (data clean) or change dtype."
        ) from None


def _row_schema(pa: Any, params: Expectations, labelled: dict[str, list[tuple[str, Any]]]) -> Any:
    return pa.DataFrameSchema(
        {
            name: pa.Column(
                None,
                nullable=exp.nullable,
                unique=exp.unique,
                checks=[check for _, check in labelled[name] if check is not None],
            )
            for name, exp in params.columns.items()
        }
    )


def _failure_cases(frame: pl.DataFrame, schema: Any) -> pl.DataFrame:
    """One row per (failing row position, check label), from pandera's failure cases."""
    import pandera.errors

    try:
        schema.validate(frame, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        cases = errors.failure_cases
    else:
        return pl.DataFrame(schema={"index": pl.Int64, "label": pl.String})
    not_row_specific = cases.filter(pl.col("index").is_null())
    if not_row_specific.height:
        first = not_row_specific.row(0, named=True)
        reason = str(first["failure_case"]).splitlines()[0]
        raise InvalidDataError(
            f"Check '{first['check']}' could not run on column '{first['column']}' "
            f"({reason}); make the expectation match the column's type."
        )
    label = (
        pl.when(pl.col("check") == "not_nullable")
        .then(pl.col("column") + ": not null")
        .when(pl.col("check") == "field_uniqueness")
        .then(pl.col("column") + ": unique")
        .otherwise(pl.col("check"))
    )
    # pandera counts repeated nulls as duplicates; here nulls only fail `nullable: false`.
    null_repeat = (pl.col("check") == "field_uniqueness") & pl.col("failure_case").is_null()
    return (
        cases.filter(~null_repeat)
        .select(pl.col("index").cast(pl.Int64), label.alias("label"))
        .unique(maintain_order=True)
    )


def _split_rows(frame: pl.DataFrame, failures: pl.DataFrame, order: list[str]) -> TransformOutput:
    rank = pl.DataFrame(
        {"label": order, "rank": range(len(order))}, schema={"label": pl.String, "rank": pl.Int64}
    )
    failures = failures.join(rank, on="label", how="left").sort("index", "rank")
    reasons = failures.group_by("index", maintain_order=True).agg(
        (pl.col("label") + " failed").str.join("; ").alias(REASON_COLUMN)
    )
    failed = pl.repeat(False, frame.height, dtype=pl.Boolean, eager=True)
    failed = failed.scatter(reasons["index"], True)
    quarantine = frame.filter(failed).with_columns(reasons[REASON_COLUMN])
    counts = failures.group_by("label").len().join(rank, on="label").sort("rank")
    report = {
        "rows": frame.height,
        "passed": frame.height - reasons.height,
        "failed": reasons.height,
        "checks": order,
        "failures": dict(zip(counts["label"].to_list(), counts["len"].to_list(), strict=True)),
    }
    return TransformOutput(
        frame=frame.filter(~failed), report=report, side_frames={"quarantine": quarantine}
    )
