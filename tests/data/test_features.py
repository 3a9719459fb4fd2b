from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from forgeml.core.configfile import load_yaml_model, parse_model
from forgeml.core.errors import ConfigError, InvalidDataError, MissingColumnError
from forgeml.data.features import FeatureSpec, FeatureSpecConfig, apply

NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
ALL_KINDS = {
    "target": "Y",
    "features": [
        {"column": "age", "kind": "standardize"},
        {"column": "hours-per-week", "kind": "minmax"},
        {"column": "workclass", "kind": "onehot", "max_categories": 50},
        {"column": "education", "kind": "ordinal"},
        {"column": "native-country", "kind": "hash", "buckets": 32},
        {"column": "when", "kind": "date_parts", "parts": ["year", "month", "day", "weekday"]},
        {"column": "sentence", "kind": "tokenize", "vocab_size": 50, "max_length": 8},
    ],
    "passthrough": ["fnlwgt"],
}


@pytest.fixture(scope="module")
def adult(shared_data: Path) -> pl.DataFrame:
    raw = pl.read_csv(shared_data / "adult" / "adult.data", infer_schema=False)
    frame = raw.rename({name: name.strip() for name in raw.columns})
    frame = frame.with_columns(pl.all().str.strip_chars()).with_columns(pl.col(NUMERIC).cast(int))
    rng = np.random.default_rng(7)
    splits = rng.choice(["train", "validation", "test"], size=frame.height, p=[0.7, 0.15, 0.15])
    day = pl.int_range(pl.len()) % 28 + 1
    return frame.with_columns(
        pl.Series("__split__", splits),
        when=pl.format("2021-02-{}", day.cast(pl.String).str.zfill(2)),
        sentence=pl.format("{} works as {}", pl.col("relationship"), pl.col("occupation")),
    )


def test_a_spec_without_numeric_columns_has_no_model_input() -> None:
    from forgeml.data.features import feature_matrix, record_encoder

    frame = pl.DataFrame({"text": ["a good film", "a bad one"]})
    feature = {"column": "text", "kind": "tokenize", "vocab_size": 8, "max_length": 4}
    spec = FeatureSpec.fit(frame, _config({"features": [feature]}))
    with pytest.raises(ConfigError, match="no numeric columns") as raised:
        feature_matrix(spec, spec.transform(frame))
    assert _is_one_sentence(str(raised.value))
    with pytest.raises(ConfigError, match="no numeric columns"):
        record_encoder(spec).encode([{"text": "a film"}])


def _config(data: dict[str, Any]) -> FeatureSpecConfig:
    return parse_model(FeatureSpecConfig, data, "spec.yaml")


def _is_one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and len(message) < 300


def _train(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("__split__") == "train")


SPEC_YAML = """
target: Y
features:
  - {column: age, kind: standardize}
  - {column: hours-per-week, kind: minmax}
  - {column: workclass, kind: onehot, max_categories: 50}
  - {column: education, kind: ordinal}
  - {column: native-country, kind: hash, buckets: 32}
  - {column: when, kind: date_parts, parts: [year, month, day, weekday]}
  - {column: sentence, kind: tokenize, vocab_size: 20000, max_length: 64, lowercase: true}
passthrough: []
"""


def test_spec_yaml_loads_and_fits(adult: pl.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_YAML, encoding="utf-8")
    config = load_yaml_model(path, FeatureSpecConfig)
    out = FeatureSpec.fit(adult, config).transform(adult)
    assert out.height == adult.height
    assert out["sentence"].list.len().unique().to_list() == [64]


def test_standardize_is_centred_on_train_rows_only(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    out = spec.transform(adult)
    ages = _train(adult)["age"].to_numpy().astype(float)
    standardize = spec.to_dict()["features"][0]
    assert standardize["mean"] == pytest.approx(ages.mean(), rel=1e-12)
    assert standardize["std"] == pytest.approx(ages.std(), rel=1e-12)
    train = _train(out)["age"].to_numpy().astype(float)
    assert abs(train.mean()) < 1e-5
    assert train.std() == pytest.approx(1.0, abs=1e-5)
    test = out.filter(pl.col("__split__") == "test")["age"].to_numpy().astype(float)
    assert abs(test.mean()) > 1e-4 or abs(test.std() - 1.0) > 1e-4
    assert out.schema["age"] == pl.Float32


def test_minmax_uses_train_range(adult: pl.DataFrame) -> None:
    out = FeatureSpec.fit(adult, _config(ALL_KINDS)).transform(adult)
    hours = _train(adult)["hours-per-week"].to_numpy().astype(float)
    expected = (adult["hours-per-week"].to_numpy() - hours.min()) / (hours.max() - hours.min())
    np.testing.assert_allclose(out["hours-per-week"].to_numpy(), expected, rtol=1e-6)
    assert _train(out)["hours-per-week"].min() == 0.0
    assert _train(out)["hours-per-week"].max() == 1.0


def test_numeric_nulls_are_imputed_with_the_train_mean() -> None:
    frame = pl.DataFrame({"x": [1.0, 3.0, None, 100.0], "__split__": ["train"] * 3 + ["test"]})
    config = _config({"features": [{"column": "x", "kind": "standardize"}]})
    out = FeatureSpec.fit(frame, config).transform(frame)
    assert out["x"].to_list() == pytest.approx([-1.0, 1.0, 0.0, 98.0])


def test_onehot_categories_come_from_train_rows_only(adult: pl.DataFrame) -> None:
    test_only = pl.when(pl.col("__split__") == "test").then(pl.lit("Moon-base"))
    frame = adult.with_columns(workclass=test_only.otherwise(pl.col("workclass")))
    config = _config({"features": [{"column": "workclass", "kind": "onehot", "max_categories": 4}]})
    out = FeatureSpec.fit(frame, config).transform(frame)
    counts = Counter(_train(frame)["workclass"].to_list())
    top4 = sorted(sorted(counts, key=lambda value: (-counts[value], value))[:4])
    assert out.columns == [f"workclass={value}" for value in [*top4, "__other__"]] + ["__split__"]
    indicators = out.select(pl.col("^workclass=.*$"))
    assert indicators.sum_horizontal().to_list() == [1] * frame.height
    moon = out.filter(pl.col("__split__") == "test")
    assert moon["workclass=__other__"].to_list() == [1] * moon.height


def test_ordinal_codes_sorted_train_values_and_unknown_is_minus_one() -> None:
    frame = pl.DataFrame({"e": ["b", "a", "c", "zz"], "__split__": ["train"] * 3 + ["test"]})
    fitted = FeatureSpec.fit(frame, _config({"features": [{"column": "e", "kind": "ordinal"}]}))
    assert fitted.transform(frame)["e"].to_list() == [1, 0, 2, -1]
    explicit = {"features": [{"column": "e", "kind": "ordinal", "categories": ["c", "b", "a"]}]}
    codes = FeatureSpec.fit(frame, _config(explicit)).transform(frame)["e"].to_list()
    assert codes == [1, 2, 0, -1]


def _blake2b_bucket(value: str, buckets: int) -> int:
    digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % buckets


@pytest.mark.parametrize("output", ["onehot", "index"])
def test_hash_buckets_are_blake2b_of_the_value(adult: pl.DataFrame, output: str) -> None:
    feature = {"column": "native-country", "kind": "hash", "buckets": 32, "output": output}
    out = FeatureSpec.fit(adult, _config({"features": [feature]})).transform(adult)
    expected = [_blake2b_bucket(value, 32) for value in adult["native-country"].to_list()]
    if output == "index":
        assert out["native-country"].to_list() == expected
        return
    buckets = out.select([f"native-country#{i}" for i in range(32)]).to_numpy()
    assert buckets.sum(axis=1).tolist() == [1] * adult.height
    assert buckets.argmax(axis=1).tolist() == expected


def _calendar(day: dt.datetime | None, has_time: bool) -> list[int | None]:
    if day is None:
        return [None] * 6
    hour = day.hour if has_time else 0
    return [day.year, day.month, day.day, day.isoweekday(), hour, day.timetuple().tm_yday]


def test_date_parts_from_strings_dates_and_datetimes() -> None:
    days = [dt.datetime(2024, 2, 29, 13, 5), dt.datetime(1999, 12, 31, 0, 0), None]
    frame = pl.DataFrame(
        {
            "s": ["2024-02-29T13:05:00", "1999-12-31", "not a date"],
            "d": [d.date() if d else None for d in days],
            "t": days,
        }
    )
    parts = ["year", "month", "day", "weekday", "hour", "dayofyear", "quarter"]
    features = [{"column": c, "kind": "date_parts", "parts": parts} for c in ("s", "d", "t")]
    out = FeatureSpec.fit(frame, _config({"features": features})).transform(frame)
    for column, has_time in (("s", True), ("d", False), ("t", True)):
        rows = out.select(f"{column}.{part}" for part in parts[:-1]).rows()
        assert [list(row) for row in rows] == [_calendar(day, has_time) for day in days]
    assert out["t.quarter"].to_list() == [1, 4, None]


def test_tokenize_vocab_is_most_frequent_first_then_alphabetical() -> None:
    frame = pl.DataFrame({"text": ["The cat, the dog.", "a Dog", None, "cat cat cat bird"]})
    feature = {"column": "text", "kind": "tokenize", "vocab_size": 5, "max_length": 4}
    spec = FeatureSpec.fit(frame, _config({"features": [feature]}))
    assert spec.to_dict()["features"][0]["vocab"] == ["cat", "dog", "the"]
    out = spec.transform(frame)
    assert out.schema["text"] == pl.List(pl.Int64)
    # cat=2 dog=3 the=4; ",", ".", "a", "bird" are unknown (1); 0 pads.
    assert out["text"].to_list() == [[4, 2, 1, 4], [1, 3, 0, 0], [0, 0, 0, 0], [2, 2, 2, 1]]


def test_round_trip_through_json_gives_identical_transform(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["format_version"] == 1
    restored = FeatureSpec.from_dict(data)
    assert restored.transform(adult).equals(spec.transform(adult))
    assert restored.to_dict() == spec.to_dict()
    assert restored.output_columns == spec.output_columns
    assert restored.input_columns == spec.input_columns
    assert restored.label_classes == ["<=50K", ">50K"]


def test_transform_records_matches_transform_row_for_row(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    sample = adult.gather(list(range(0, adult.height, 97)))
    assert spec.transform_records(sample.to_dicts()).equals(spec.transform(sample))
    for position in (0, 5, 17):
        one = spec.transform_records([sample.row(position, named=True)])
        assert one.equals(spec.transform(sample.slice(position, 1)))


def test_serving_records_without_target_or_split_get_features_only(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    record = adult.select(spec.input_columns).row(0, named=True)
    record["workclass"] = "Never-seen-before"
    out = spec.transform_records([record])
    assert out.columns == spec.output_columns
    assert out["workclass=__other__"].to_list() == [1]


def test_apply_reports_what_was_fitted(adult: pl.DataFrame) -> None:
    result = apply(adult, _config(ALL_KINDS))
    report = json.loads(json.dumps(result.report))
    assert report["fitted_on"] == "train split"
    assert report["fitted_rows"] == _train(adult).height
    assert report["rows"] == adult.height
    assert [f["output_columns"] for f in report["features"]] == [1, 1, 10, 1, 32, 4, 1]
    # workclass: 9 train values (incl. "?") + __other__; fnlwgt passes through.
    assert report["output_columns"] == 51
    assert result.frame.columns[-2:] == ["Y", "__split__"]
    assert (
        FeatureSpec.from_dict(result.artifacts["feature_spec"])
        .transform(adult)
        .equals(result.frame)
    )
    assert apply(adult, _config(ALL_KINDS)).frame.equals(result.frame)


def test_without_split_column_fits_on_all_rows(adult: pl.DataFrame) -> None:
    result = apply(adult.drop("__split__"), _config(ALL_KINDS))
    assert result.report["fitted_on"] == "all rows (no __split__ column)"
    assert result.report["fitted_rows"] == adult.height
    assert abs(result.frame.select(pl.col("age").mean()).item()) < 1e-5


@pytest.mark.parametrize(
    ("target", "classes"),
    [([2, 0, 1, 0], [0, 1, 2]), (["b", "a", "a", None], ["a", "b"]), ([0.5, 1.5, 2.5, 3.0], None)],
)
def test_label_classes_are_sorted_train_values(target: list[Any], classes: Any) -> None:
    frame = pl.DataFrame({"x": [1, 2, 3, 4], "y": target})
    config = _config({"target": "y", "features": [{"column": "x", "kind": "minmax"}]})
    spec = FeatureSpec.fit(frame, config)
    assert spec.label_classes == classes
    assert spec.transform(frame)["y"].to_list() == target


def test_reserved_columns_are_kept_even_if_the_fit_data_had_none(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult.drop("__split__"), _config(ALL_KINDS))
    marked = adult.head(4).with_columns(__augmented__=pl.Series([True, False, True, False]))
    out = spec.transform(marked)
    assert out.columns[-3:] == ["Y", "__split__", "__augmented__"]
    assert spec.transform_records(marked.to_dicts()).equals(out)


def test_missing_column_at_fit_names_it(adult: pl.DataFrame) -> None:
    with pytest.raises(MissingColumnError) as error:
        FeatureSpec.fit(adult.drop("education"), _config(ALL_KINDS))
    assert "'education'" in str(error.value)
    assert _is_one_sentence(str(error.value))


def test_missing_column_at_transform_names_it(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    with pytest.raises(MissingColumnError) as error:
        spec.transform(adult.drop("native-country"))
    assert "'native-country'" in str(error.value)
    assert _is_one_sentence(str(error.value))


def test_record_missing_a_field_names_it(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    records = adult.head(3).to_dicts()
    del records[2]["age"]
    with pytest.raises(MissingColumnError) as error:
        spec.transform_records(records)
    assert "Record 2" in str(error.value)
    assert "'age'" in str(error.value)
    assert _is_one_sentence(str(error.value))


@pytest.mark.parametrize(("field", "value"), [("age", "forty"), ("workclass", 3)])
def test_record_value_of_the_wrong_type_is_refused(
    adult: pl.DataFrame, field: str, value: Any
) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    record = adult.row(0, named=True) | {field: value}
    with pytest.raises(InvalidDataError) as error:
        spec.transform_records([record])
    assert f"'{field}'" in str(error.value)
    assert _is_one_sentence(str(error.value))


def test_column_that_cannot_take_its_training_type_is_refused(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    with pytest.raises(InvalidDataError) as error:
        spec.transform(adult.with_columns(pl.col("age").cast(pl.String) + "y"))
    assert "'age'" in str(error.value)
    assert _is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    ("feature", "words"),
    [
        ({"column": "workclass", "kind": "standardize"}, "numeric column"),
        ({"column": "workclass", "kind": "tokenize"}, None),
        ({"column": "age", "kind": "date_parts"}, "date or datetime"),
        ({"column": "age", "kind": "tokenize"}, "string column"),
    ],
)
def test_feature_on_a_column_of_the_wrong_type_is_refused(
    adult: pl.DataFrame, feature: dict[str, Any], words: str | None
) -> None:
    if words is None:  # tokenize on a string column is fine
        FeatureSpec.fit(adult, _config({"features": [feature]}))
        return
    with pytest.raises(InvalidDataError) as error:
        FeatureSpec.fit(adult, _config({"features": [feature]}))
    assert words in str(error.value)
    assert _is_one_sentence(str(error.value))


def test_split_without_train_rows_is_refused(adult: pl.DataFrame) -> None:
    frame = adult.filter(pl.col("__split__") != "train")
    with pytest.raises(InvalidDataError) as error:
        FeatureSpec.fit(frame, _config(ALL_KINDS))
    assert "no 'train' rows" in str(error.value)
    assert _is_one_sentence(str(error.value))


def test_all_null_numeric_train_column_is_refused() -> None:
    frame = pl.DataFrame({"x": [None, None], "__split__": ["train", "test"]}).cast({"x": float})
    with pytest.raises(InvalidDataError) as error:
        FeatureSpec.fit(frame, _config({"features": [{"column": "x", "kind": "standardize"}]}))
    assert "no non-null values" in str(error.value)


def test_two_features_with_the_same_output_column_are_refused(adult: pl.DataFrame) -> None:
    features = [{"column": "age", "kind": "standardize"}, {"column": "age", "kind": "minmax"}]
    with pytest.raises(ConfigError) as error:
        FeatureSpec.fit(adult, _config({"features": features}))
    assert "'age' twice" in str(error.value)
    assert _is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"features": []}, "features"),
        ({"features": [{"column": "a", "kind": "scale"}]}, "features.0"),
        ({"features": [{"column": "a", "kind": "standardize", "buckets": 3}]}, "buckets"),
        ({"features": [{"column": "a", "kind": "hash", "buckets": 1}]}, "buckets"),
        ({"features": [{"column": "a", "kind": "tokenize", "vocab_size": 2}]}, "vocab_size"),
        ({"features": [{"column": "a", "kind": "date_parts", "parts": ["era"]}]}, "parts"),
        ({"features": [{"column": "a", "kind": "ordinal", "categories": ["x", "x"]}]}, "repeat"),
        ({"target": "a", "features": [{"column": "a", "kind": "minmax"}]}, "target 'a'"),
        ({"features": [{"column": "a", "kind": "minmax"}], "passthrough": ["__split__"]}, "res"),
        ({"features": [{"column": "a", "kind": "minmax"}], "extra": 1}, "unknown key 'extra'"),
    ],
)
def test_invalid_spec_config_names_the_key(data: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError) as error:
        _config(data)
    assert "spec.yaml" in str(error.value)
    assert words in str(error.value)
    assert _is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"format_version": 2}, "format_version 2"),
        ({"format_version": None}, "format_version None"),
        ({"features": [{"kind": "nope"}]}, "malformed"),
        ({"input_schema": {}}, "malformed"),
    ],
)
def test_from_dict_refuses_unknown_versions_and_malformed_specs(
    adult: pl.DataFrame, change: dict[str, Any], words: str
) -> None:
    data = FeatureSpec.fit(adult, _config(ALL_KINDS)).to_dict() | change
    with pytest.raises(ConfigError) as error:
        FeatureSpec.from_dict(data)
    assert words in str(error.value)
    assert _is_one_sentence(str(error.value))


def test_empty_frame_and_no_records_give_empty_outputs(adult: pl.DataFrame) -> None:
    spec = FeatureSpec.fit(adult, _config(ALL_KINDS))
    empty = spec.transform(adult.head(0))
    assert empty.height == 0
    assert empty.columns == [*spec.output_columns, "Y", "__split__"]
    assert spec.transform_records([]).columns == spec.output_columns
