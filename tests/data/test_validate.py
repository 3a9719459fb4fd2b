from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from forgeml.core.configfile import load_yaml_model, parse_model
from forgeml.core.errors import ConfigError, InvalidDataError, MissingColumnError
from forgeml.data.validate import REASON_COLUMN, Expectations, apply

NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]


@pytest.fixture(scope="module")
def adult(shared_data: Path) -> pl.DataFrame:
    raw = pl.read_csv(shared_data / "adult" / "adult.data", separator=",", infer_schema=False)
    frame = raw.rename({name: name.strip() for name in raw.columns})
    frame = frame.with_columns(pl.all().str.strip_chars())
    frame = frame.with_columns(pl.when(pl.all() != "?").then(pl.all()).name.keep())
    return frame.with_columns(pl.col(NUMERIC).cast(pl.Int64))


def _expect(data: dict[str, Any]) -> Expectations:
    return parse_model(Expectations, data, "expectations.yaml")


def _is_one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and len(message) < 300


def test_age_ge_18_quarantines_exactly_the_minors(adult: pl.DataFrame) -> None:
    out = apply(adult, _expect({"columns": {"age": {"dtype": "int", "ge": 18}}}))

    ages = adult["age"].to_list()
    minors = sum(age < 18 for age in ages)
    assert minors == 395
    assert out.report == {
        "rows": 32561,
        "passed": 32561 - minors,
        "failed": minors,
        "checks": ["age: ge 18"],
        "failures": {"age: ge 18": minors},
    }
    assert out.frame.equals(adult.filter(pl.col("age") >= 18))
    quarantine = out.side_frames["quarantine"]
    assert quarantine.drop(REASON_COLUMN).equals(adult.filter(pl.col("age") < 18))
    assert set(quarantine[REASON_COLUMN]) == {"age: ge 18 failed"}


def _reference_reasons(row: dict[str, Any], seen: Counter[int]) -> list[str]:
    reasons = []
    if row["age"] > 80:
        reasons.append("age: le 80")
    if row["workclass"] is None:
        reasons.append("workclass: not null")
    elif not row["workclass"][0].isupper():
        reasons.append("workclass: regex '^[A-Z]'")
    if row["race"] == "Other":
        reasons.append("race: notin ['Other']")
    if seen[row["fnlwgt"]] > 1:
        reasons.append("fnlwgt: unique")
    if row["native-country"] is not None and len(row["native-country"]) > 13:
        reasons.append("native-country: max_length 13")
    return reasons


def test_every_failed_check_is_listed_per_row(adult: pl.DataFrame) -> None:
    expectations = {
        "age": {"le": 80},
        "workclass": {"nullable": False, "regex": "^[A-Z]"},
        "race": {"notin": ["Other"]},
        "fnlwgt": {"unique": True},
        "native-country": {"max_length": 13},
    }

    out = apply(adult, _expect({"columns": expectations}))

    seen = Counter(adult["fnlwgt"].to_list())
    expected = [_reference_reasons(row, seen) for row in adult.iter_rows(named=True)]
    failing = [reasons for reasons in expected if reasons]
    quarantine = out.side_frames["quarantine"]
    assert quarantine[REASON_COLUMN].to_list() == [
        "; ".join(f"{reason} failed" for reason in reasons) for reasons in failing
    ]
    assert out.report["failed"] == len(failing) == quarantine.height
    assert out.report["passed"] == out.frame.height == adult.height - len(failing)
    counts = Counter(reason for reasons in failing for reason in reasons)
    assert out.report["failures"] == dict(counts)
    assert list(out.report["failures"]) == [c for c in out.report["checks"] if c in counts]
    assert counts["workclass: not null"] == 1836
    assert out.frame.equals(adult.filter(pl.Series([not reasons for reasons in expected])))


def test_sex_isin_and_nullable(adult: pl.DataFrame) -> None:
    out = apply(adult, _expect({"columns": {"sex": {"isin": ["Male"], "nullable": False}}}))

    females = adult["sex"].to_list().count("Female")
    assert out.report["failures"] == {"sex: isin ['Male']": females}
    assert out.frame["sex"].unique().to_list() == ["Male"]


@pytest.mark.parametrize(
    ("column", "spec", "passing"),
    [
        ("email", {"regex": r"^[^@]+@[^@]+$"}, [True, False, False, True, True]),
        ("email", {"min_length": 4, "max_length": 7}, [True, False, True, True, True]),
        ("n", {"gt": 1, "lt": 4}, [False, True, True, False, True]),
        ("n", {"isin": [1, 2]}, [True, True, False, False, True]),
        ("m", {"unique": True}, [False, True, True, True, False]),
        ("n", {"nullable": False}, [True, True, True, True, False]),
        ("day", {"ge": dt.date(2024, 1, 2)}, [False, True, True, True, True]),
    ],
)
def test_row_checks(column: str, spec: dict[str, Any], passing: list[bool]) -> None:
    frame = pl.DataFrame(
        {
            "email": ["a@b.c", "ab", "x@y@z", "q@rr", None],
            "n": [1, 2, 3, 4, None],
            "m": [1, None, 3, None, 1],
            "day": [dt.date(2024, 1, d) for d in range(1, 6)],
        }
    )

    out = apply(frame, _expect({"columns": {column: spec}}))

    assert out.frame.equals(frame.filter(pl.Series(passing)))
    assert out.report["failed"] == passing.count(False)


def test_all_passing_gives_empty_quarantine_with_reason_column() -> None:
    frame = pl.DataFrame({"a": [1, 2], "__split__": ["train", "test"]})

    out = apply(frame, _expect({"columns": {"a": {"dtype": "number", "ge": 0}}, "strict": True}))

    assert out.frame.equals(frame)
    assert out.side_frames["quarantine"].schema == pl.Schema(
        {"a": pl.Int64, "__split__": pl.String, REASON_COLUMN: pl.String}
    )
    assert out.report["failures"] == {}
    json.dumps(out.report)


@pytest.mark.parametrize(
    ("dtype", "series", "ok"),
    [
        ("int", pl.Series([1], dtype=pl.Int32), True),
        ("int", pl.Series([1], dtype=pl.UInt8), True),
        ("int", pl.Series([1.0]), False),
        ("float", pl.Series([1.0], dtype=pl.Float32), True),
        ("number", pl.Series([1]), True),
        ("str", pl.Series(["a"]), True),
        ("str", pl.Series([1]), False),
        ("bool", pl.Series([True]), True),
        ("date", pl.Series([dt.date(2024, 1, 1)]), True),
        ("datetime", pl.Series([dt.datetime(2024, 1, 1)]), True),
        ("datetime", pl.Series([dt.date(2024, 1, 1)]), False),
    ],
)
def test_dtype_families(dtype: str, series: pl.Series, ok: bool) -> None:
    frame = series.alias("c").to_frame()
    expectations = _expect({"columns": {"c": {"dtype": dtype}}})

    if ok:
        assert apply(frame, expectations).report["passed"] == 1
    else:
        with pytest.raises(InvalidDataError) as error:
            apply(frame, expectations)
        message = str(error.value)
        assert message.startswith(f"Column 'c' is {series.dtype}, but the expectations require")
        assert _is_one_sentence(message)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"columns": {"a": {}}, "strict": True}, "Column 'b' is not in the expectations"),
        ({"columns": {"b": {"ge": 1}}}, "'b: ge 1' needs a numeric column, but 'b' is String"),
        ({"columns": {"c": {"le": dt.date(2024, 1, 1)}}}, "needs a date column, but 'c' is Int64"),
        ({"columns": {"a": {"regex": "x"}}}, "'a: regex' needs a text column"),
        ({"columns": {"b": {"isin": [1, 2]}}}, "lists non-text values for the text column"),
        ({"columns": {"a": {"notin": ["x"]}}}, "lists text values for the Int64 column"),
        ({"columns": {"d": {"isin": ["2024-01-01"]}}}, "Check 'd: isin ['2024-01-01']' could"),
    ],
)
def test_column_level_problems_raise_one_sentence(spec: dict[str, Any], fragment: str) -> None:
    frame = pl.DataFrame(
        {"a": [1, 2], "b": ["x", "y"], "c": [1, 2], "d": [dt.date(2024, 1, 1)] * 2}
    )

    with pytest.raises(InvalidDataError) as error:
        apply(frame, _expect(spec))

    assert fragment in str(error.value)
    assert _is_one_sentence(str(error.value))


def test_missing_column_raises() -> None:
    with pytest.raises(MissingColumnError) as error:
        apply(pl.DataFrame({"a": [1]}), _expect({"columns": {"nope": {"nullable": False}}}))

    assert str(error.value).startswith("An expectation names column 'nope', which the data")
    assert _is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"columns": {"a": {"regex": "("}}}, "invalid regular expression"),
        ({"columns": {"a": {"min_length": 5, "max_length": 2}}}, "greater than max_length"),
        ({"columns": {"a": {"isin": []}}}, "columns.a.isin"),
        ({"columns": {"a": {"dtype": "integer"}}}, "columns.a.dtype"),
        ({"columns": {"a": {"greater": 1}}}, "unknown key 'columns.a.greater'"),
        ({"columns": {"__split__": {}}}, "reserved column '__split__'"),
    ],
)
def test_invalid_expectations_are_config_errors(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as error:
        _expect(spec)

    assert fragment in str(error.value)
    assert str(error.value).startswith("expectations.yaml: ")


def test_yaml_file_round_trip_is_deterministic(adult: pl.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "expectations.yaml"
    path.write_text(
        "columns:\n"
        "  age: {dtype: int, nullable: false, ge: 17, le: 90}\n"
        "  sex: {isin: [Male, Female]}\n"
        "  workclass: {regex: '^[A-Z][a-z]'}\n"
        "  fnlwgt: {gt: 0, unique: false}\n"
        "strict: false\n",
        encoding="utf-8",
    )
    frame = adult.with_columns(pl.Series("__split__", ["train", "test"] * 16280 + ["train"]))

    expectations = load_yaml_model(path, Expectations)
    first, second = apply(frame, expectations), apply(frame, expectations)

    assert first.frame.equals(second.frame)
    assert first.side_frames["quarantine"].equals(second.side_frames["quarantine"])
    assert json.dumps(first.report) == json.dumps(second.report)
    reference = frame.filter(
        pl.col("age").is_between(17, 90)
        & pl.col("sex").is_in(["Male", "Female"])
        & (pl.col("workclass").str.contains("^[A-Z][a-z]") | pl.col("workclass").is_null())
        & (pl.col("fnlwgt") > 0)
    )
    assert first.frame.equals(reference)
    assert first.frame.columns == frame.columns
