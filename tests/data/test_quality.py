from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from forgeml.core.errors import InvalidDataError, MissingColumnError
from forgeml.data.quality import diff, guess_label, profile

NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]


@pytest.fixture(scope="module")
def adult(shared_data: Path) -> pl.DataFrame:
    raw = pl.read_csv(shared_data / "adult" / "adult.data", infer_schema=False)
    frame = raw.rename({name: name.strip() for name in raw.columns})
    return frame.with_columns(pl.all().str.strip_chars()).with_columns(pl.col(NUMERIC).cast(int))


@pytest.fixture
def small() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "n": [3, None, 7, 7, -2, 3],
            "x": [0.5, float("nan"), None, 2.5, 10.0, 0.5],
            "s": ["bb", "a", None, "bb", "cccc", "bb"],
            "flag": [True, False, None, True, True, True],
            "day": [dt.date(2024, 1, d) for d in (5, 1, 9, 9, 2, 5)],
            "blob": [b"ab", b"", None, b"ab", b"abcdef", b"ab"],
            "tags": [[1, 2], [], None, [1, 2], [3], [1, 2]],
            "__split__": ["train", "train", "test", "train", "validation", "train"],
        }
    )


def _is_one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and len(message) < 300


def _reference_numeric(values: list[Any]) -> dict[str, Any]:
    real = np.array([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    counts, edges = np.histogram(real, bins=10, range=(real.min(), real.max()))
    return {
        "min": real.min(),
        "max": real.max(),
        "mean": real.mean(),
        "std": real.std(ddof=1),
        "counts": counts.tolist(),
        "edges": edges.tolist(),
    }


def test_profile_is_json_serialisable_and_has_the_schema(small: pl.DataFrame) -> None:
    result = profile(small)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    assert result["rows"] == 6
    assert result["columns"] == {name: str(dtype) for name, dtype in small.schema.items()}
    assert "__split__" not in result["column_stats"]
    assert result["splits"] == {"train": 4, "validation": 1, "test": 1}


@pytest.mark.parametrize("column", ["n", "x", "s", "flag", "day", "blob", "tags"])
def test_nulls_and_distinct_match_python(small: pl.DataFrame, column: str) -> None:
    stats = profile(small)["column_stats"][column]
    values = small[column].to_list()
    present = [v for v in values if v is not None]
    assert stats["nulls"] == values.count(None)
    assert stats["null_fraction"] == values.count(None) / len(values)
    hashable = [tuple(v) if isinstance(v, list) else v for v in present]
    distinct = {("nan" if isinstance(v, float) and math.isnan(v) else v) for v in hashable}
    assert stats["distinct"] == len(distinct)


@pytest.mark.parametrize("column", ["n", "x"])
def test_numeric_stats_match_numpy(small: pl.DataFrame, column: str) -> None:
    stats = profile(small)["column_stats"][column]
    expected = _reference_numeric(small[column].to_list())
    for key in ("min", "max", "mean", "std"):
        assert stats[key] == pytest.approx(expected[key], rel=1e-12)
    assert stats["histogram"]["counts"] == expected["counts"]
    assert stats["histogram"]["edges"] == pytest.approx(expected["edges"], rel=1e-12)


@pytest.mark.parametrize(
    "values",
    [
        list(range(11)),
        [1, 40, 45, 49, 50, 51, 60, 99],
        [0.1 * k for k in range(-30, 31)],
        [-1e300, 0.0, 3.3, 1e300],
    ],
)
def test_histogram_values_on_edges_match_numpy(values: list[float]) -> None:
    histogram = profile(pl.DataFrame({"v": values}))["column_stats"]["v"]["histogram"]
    counts, edges = np.histogram(values, bins=10, range=(min(values), max(values)))
    assert histogram == {"edges": edges.tolist(), "counts": counts.tolist()}


def test_float_nans_are_counted_apart_from_statistics(small: pl.DataFrame) -> None:
    stats = profile(small)["column_stats"]["x"]
    assert stats["nans"] == 1
    assert stats["nulls"] == 1
    assert "nans" not in profile(small)["column_stats"]["n"]


def test_string_top_values_and_lengths(small: pl.DataFrame) -> None:
    stats = profile(small)["column_stats"]["s"]
    assert stats["top"] == [
        {"value": "bb", "count": 3},
        {"value": "a", "count": 1},
        {"value": "cccc", "count": 1},
    ]
    assert (stats["min_length"], stats["max_length"]) == (1, 4)


def test_other_types_get_their_own_stats(small: pl.DataFrame) -> None:
    stats = profile(small)["column_stats"]
    assert stats["flag"]["true"] == 4
    assert (stats["day"]["min"], stats["day"]["max"]) == ("2024-01-01", "2024-01-09")
    sizes = [len(v) for v in small["blob"].to_list() if v is not None]
    assert stats["blob"]["min_size"] == min(sizes)
    assert stats["blob"]["max_size"] == max(sizes)
    assert stats["blob"]["mean_size"] == pytest.approx(sum(sizes) / len(sizes))
    assert "top" not in stats["blob"]
    assert (stats["tags"]["min_length"], stats["tags"]["max_length"]) == (0, 2)


def test_other_dtypes_profile_to_plain_json() -> None:
    frame = pl.DataFrame(
        {
            "nothing": [None, None, None],
            "price": [decimal.Decimal("1.50"), decimal.Decimal("2.25"), None],
            "colour": ["red", "blue", "red"],
            "at": [dt.datetime(2020, 1, 1), None, dt.datetime(2021, 1, 1)],
            "took": [dt.timedelta(seconds=5), None, dt.timedelta(hours=1)],
            "pair": [[1, 2], [3, 4], None],
            "wild": [1.0, float("inf"), 2.0],
        }
    ).with_columns(
        pl.col("colour").cast(pl.Categorical),
        pl.col("at").dt.replace_time_zone("UTC"),
        pl.col("pair").cast(pl.Array(pl.Int64, 2)),
    )
    result = profile(frame)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    stats = result["column_stats"]
    assert stats["nothing"] == {"nulls": 3, "distinct": 0, "null_fraction": 1.0}
    assert (stats["price"]["mean"], stats["price"]["max"]) == (1.875, 2.25)
    assert stats["colour"]["top"][0] == {"value": "red", "count": 2}
    assert stats["at"]["max"] == "2021-01-01T00:00:00+00:00"
    assert stats["took"]["max"] == 3600.0
    assert stats["pair"]["max_length"] == 2
    assert (stats["wild"]["max"], stats["wild"]["histogram"]) == (None, None)


def test_duplicate_rate_counts_repeats_of_earlier_rows(small: pl.DataFrame) -> None:
    rows = [tuple(map(str, row)) for row in small.drop("__split__").rows()]
    expected = (len(rows) - len(set(rows))) / len(rows)
    assert expected == pytest.approx(1 / 6)
    assert profile(small)["duplicate_rate"] == pytest.approx(expected)


def test_duplicate_rate_ignores_reserved_columns() -> None:
    frame = pl.DataFrame({"a": [1, 1, 1, 2], "__split__": ["train", "test", "train", "train"]})
    assert profile(frame)["duplicate_rate"] == 0.5


def test_constant_column_gets_one_histogram_bin() -> None:
    stats = profile(pl.DataFrame({"c": [4, 4, 4]}))["column_stats"]["c"]
    assert stats["histogram"] == {"edges": [4.0, 4.0], "counts": [3]}
    assert stats["std"] == 0.0


def test_empty_frame_profiles_without_statistics() -> None:
    frame = pl.DataFrame(schema={"a": pl.Int64, "b": pl.String})
    result = profile(frame)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
    assert result["rows"] == 0
    assert result["duplicate_rate"] == 0.0
    assert result["column_stats"]["a"]["histogram"] is None
    assert result["column_stats"]["b"]["top"] == []


def test_adult_reference_counts(adult: pl.DataFrame) -> None:
    result = profile(adult, label="Y")
    assert result["rows"] == 32561
    workclass = {
        item["value"]: item["count"] for item in result["column_stats"]["workclass"]["top"]
    }
    assert workclass["?"] == 1836
    assert workclass == dict(Counter(adult["workclass"].to_list()))
    assert result["label_balance"] == {
        "<=50K": {"count": 24720, "fraction": 24720 / 32561},
        ">50K": {"count": 7841, "fraction": 7841 / 32561},
    }
    rows = adult.rows()
    assert result["duplicate_rate"] == pytest.approx((len(rows) - len(set(rows))) / len(rows))


@pytest.mark.parametrize("column", NUMERIC)
def test_adult_numeric_stats_match_numpy(adult: pl.DataFrame, column: str) -> None:
    stats = profile(adult.select(column))["column_stats"][column]
    expected = _reference_numeric(adult[column].to_list())
    assert stats["mean"] == pytest.approx(expected["mean"], rel=1e-12)
    assert stats["std"] == pytest.approx(expected["std"], rel=1e-12)
    assert (stats["min"], stats["max"]) == (expected["min"], expected["max"])
    assert stats["histogram"]["counts"] == expected["counts"]


def test_adult_string_top_ten_matches_counter(adult: pl.DataFrame) -> None:
    stats = profile(adult)["column_stats"]["native-country"]
    counts = Counter(adult["native-country"].to_list())
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:10]
    assert stats["top"] == [{"value": value, "count": n} for value, n in ranked]
    assert stats["distinct"] == len(counts)


def test_label_balance_names_null_labels() -> None:
    frame = pl.DataFrame({"y": [1, 0, None, 1]})
    assert profile(frame, label="y")["label_balance"] == {
        "0": {"count": 1, "fraction": 0.25},
        "1": {"count": 2, "fraction": 0.5},
        "__null__": {"count": 1, "fraction": 0.25},
    }


def test_augmented_rows_are_counted() -> None:
    frame = pl.DataFrame({"a": [1, 2, 3], "__augmented__": [False, True, True]})
    result = profile(frame)
    assert result["augmented"] == 2
    assert list(result["column_stats"]) == ["a"]


def test_missing_label_column_is_refused(small: pl.DataFrame) -> None:
    with pytest.raises(MissingColumnError) as error:
        profile(small, label="income")
    assert "'income'" in str(error.value)
    assert _is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        (["age", "Y"], "Y"),
        (["text", "LABEL"], "LABEL"),
        (["y", "target"], "target"),
        (["label", "class"], "label"),
        (["Class", "outcome"], "Class"),
        (["Target", "target"], "Target"),
        (["age", "labelled", "my_label"], None),
        ([], None),
    ],
)
def test_guess_label(columns: list[str], expected: str | None) -> None:
    assert guess_label(columns) == expected


def test_diff_reports_schema_rows_and_changed_stats_only(small: pl.DataFrame) -> None:
    before = profile(small)
    changed = small.with_columns(pl.col("n").fill_null(0), pl.col("flag").cast(pl.Int8))
    after = profile(changed.drop("blob").with_columns(extra=pl.lit(1)).head(5))
    result = diff(before, after)
    assert json.loads(json.dumps(result)) == result
    assert result["rows"] == {"before": 6, "after": 5, "change": -1}
    assert result["schema"] == {
        "added": {"extra": "Int32"},
        "removed": {"blob": "Binary"},
        "dtype_changed": {"flag": {"before": "Boolean", "after": "Int8"}},
    }
    n_before, n_after = before["column_stats"]["n"], after["column_stats"]["n"]
    assert result["columns"]["n"] == {
        stat: {"before": n_before[stat], "after": n_after[stat]}
        for stat in ("nulls", "distinct", "mean", "std")
    }
    assert "s" not in result["columns"]


def test_diff_of_identical_profiles_is_empty(adult: pl.DataFrame) -> None:
    first = profile(adult)
    result = diff(first, profile(adult))
    assert result["rows"]["change"] == 0
    assert result["schema"] == {"added": {}, "removed": {}, "dtype_changed": {}}
    assert result["columns"] == {}
    assert "duplicate_rate" not in result


@pytest.mark.parametrize("bad", [{}, {"rows": 1}, [], None])
def test_diff_refuses_what_is_not_a_profile(small: pl.DataFrame, bad: Any) -> None:
    with pytest.raises(InvalidDataError) as error:
        diff(profile(small), bad)
    assert "second argument" in str(error.value)
    assert _is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    "values",
    [
        ["k", "c", "a", "b", "z", "y", "x", "w", "v", "u", "t", "s"],
        ["k", "c", "a", "c", "z", "y", None, "x", "w", "v", "u", "t", "s", "c", "k"],
        ["r"] * 12 + [f"u{i:03d}" for i in range(200)] + ["q"] * 3 + [None],
        ["same"] * 30,
        [None, None],
    ],
    ids=["all unique", "ties at one", "many singles", "one value", "all null"],
)
def test_text_counts_match_counter(values: list[str | None]) -> None:
    for dtype in (pl.String, pl.Categorical):
        frame = pl.DataFrame({"s": values}, schema={"s": dtype})
        stats = profile(frame)["column_stats"]["s"]
        counts = Counter(v for v in values if v is not None)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:10]
        assert stats["top"] == [{"value": value, "count": n} for value, n in ranked]
        assert stats["distinct"] == len(counts)


def _with_split(frame: pl.DataFrame) -> pl.DataFrame:
    splits = pl.Series("__split__", ["train", "test"] * (frame.height // 2))
    return frame.reverse().with_columns(splits)


def test_statistics_of_unchanged_columns_are_copied(small: pl.DataFrame) -> None:
    user = small.drop("__split__")
    first = profile(user, known=[])
    again = profile(_with_split(user), known=[first])
    assert again["column_stats"] == first["column_stats"]
    assert again["fingerprints"] == first["fingerprints"]
    assert again["duplicate_rate"] == first["duplicate_rate"]
    assert again["splits"] == {"train": 3, "test": 3}
    fresh = profile(_with_split(user))
    for name, stats in fresh["column_stats"].items():
        assert stats.keys() == first["column_stats"][name].keys()


@pytest.mark.parametrize(
    ("change", "changed"),
    [
        (pl.col("n").fill_null(0), "n"),
        (pl.col("s").replace("bb", "b"), "s"),
        (pl.col("x").cast(pl.Float32), "x"),
        (pl.col("tags").list.reverse(), "tags"),
    ],
    ids=["value", "text", "type", "list"],
)
def test_changed_columns_are_profiled_again(
    small: pl.DataFrame, change: pl.Expr, changed: str
) -> None:
    user = small.drop("__split__")
    first = profile(user)
    # A sentinel: copied statistics would keep it, computed ones cannot.
    planted = {
        **first,
        "column_stats": {k: {**v, "planted": 1} for k, v in first["column_stats"].items()},
    }
    edited = user.with_columns(change)
    result = profile(edited, known=[planted])
    assert result == profile(edited) | {
        "column_stats": {
            name: stats if name == changed else {**stats, "planted": 1}
            for name, stats in profile(edited)["column_stats"].items()
        }
    }


def test_duplicate_rate_is_copied_only_for_the_same_rows() -> None:
    frame = pl.DataFrame({"a": [1, 1, 2, 3], "b": ["x", "x", "y", "z"]})
    first = profile(frame)
    assert first["duplicate_rate"] == 0.25
    planted = {**first, "duplicate_rate": 0.5}
    assert profile(frame.reverse(), known=[planted])["duplicate_rate"] == 0.5
    swapped = frame.with_columns(pl.col("b").reverse())  # same column values, other rows
    assert profile(swapped, known=[planted])["duplicate_rate"] == 0.0
