from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from forgeml.core.configfile import load_yaml_model, parse_model
from forgeml.core.errors import InvalidDataError, MissingColumnError
from forgeml.data._records import RecordEncoder
from forgeml.data.features import (
    FeatureSpec,
    FeatureSpecConfig,
    feature_matrix,
    record_encoder,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SPEC = ROOT / "examples" / "adult" / "features.yaml"
NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
GIVEN_EDUCATION = ["Preschool", "HS-grad", "Bachelors", "Masters", "Doctorate"]
# Every fast-path kind and dtype: Int64, Float64 and Float32 numbers, onehot, ordinal with
# fitted and given categories, hash in both output modes, passthrough of Int64, Float64,
# Boolean (in the matrix) and String (left out of it, still type-checked).
EDGE_SPEC = {
    "target": "Y",
    "features": [
        {"column": "age", "kind": "standardize"},
        {"column": "ratio", "kind": "standardize"},
        {"column": "ratio32", "kind": "minmax"},
        {"column": "workclass", "kind": "onehot", "max_categories": 5},
        {"column": "education", "kind": "ordinal", "categories": GIVEN_EDUCATION},
        {"column": "occupation", "kind": "ordinal"},
        {"column": "native-country", "kind": "hash", "buckets": 16, "output": "index"},
        {"column": "race", "kind": "hash", "buckets": 8, "output": "onehot"},
    ],
    "passthrough": ["fnlwgt", "weight", "flag", "sex"],
}


def _read_adult(path: Path) -> pl.DataFrame:
    """An Adult file cleaned as the serving example does: '?' -> null, numbers as Int64."""
    raw = pl.read_csv(path, infer_schema=False)
    frame = raw.rename({column: column.strip() for column in raw.columns})
    frame = frame.with_columns(pl.all().str.strip_chars().replace("?", None))
    frame = frame.with_columns(pl.col(NUMERIC).cast(pl.Int64))
    # Float, Float32 and Boolean columns derived from real values, with NaN and nulls in them.
    ratio = (
        pl.when(pl.col("age") % 17 == 0)
        .then(float("nan"))
        .otherwise(pl.col("fnlwgt") / pl.col("age") * 0.001)
    )
    flag = pl.when(pl.col("age") % 11 == 0).then(None).otherwise(pl.col("sex") == "Male")
    return frame.with_columns(
        ratio=ratio,
        ratio32=ratio.cast(pl.Float32),
        weight=pl.col("hours-per-week") * 1.37,
        flag=flag,
    )


@pytest.fixture(scope="module")
def adult_train(shared_data: Path) -> pl.DataFrame:
    return _read_adult(shared_data / "adult" / "adult.data")


@pytest.fixture(scope="module")
def adult_test(shared_data: Path) -> pl.DataFrame:
    return _read_adult(shared_data / "adult" / "adult.test")


@pytest.fixture(scope="module")
def example_spec(adult_train: pl.DataFrame) -> FeatureSpec:
    return FeatureSpec.fit(adult_train, load_yaml_model(EXAMPLE_SPEC, FeatureSpecConfig))


@pytest.fixture(scope="module")
def edge_spec(adult_train: pl.DataFrame) -> FeatureSpec:
    return FeatureSpec.fit(adult_train, parse_model(FeatureSpecConfig, EDGE_SPEC, "edge"))


def _records(frame: pl.DataFrame, spec: FeatureSpec) -> list[dict[str, Any]]:
    return frame.select(spec.input_columns).to_dicts()


def _reference(spec: FeatureSpec, records: list[dict[str, Any]]) -> np.ndarray:
    return feature_matrix(spec, spec.transform_records(records))


def _assert_same_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == np.float32
    assert actual.shape == expected.shape
    # Compare bit patterns: NaN equals NaN, and -0.0 differs from 0.0.
    mismatched = np.argwhere(actual.view(np.uint32) != expected.view(np.uint32))
    assert mismatched.size == 0, f"first mismatch at {mismatched[0]}"


def _fast_only(spec: FeatureSpec, monkeypatch: pytest.MonkeyPatch) -> RecordEncoder:
    """An encoder of a copy of `spec` whose polars path fails, so only the fast path works."""
    copy = FeatureSpec.from_dict(spec.to_dict())
    encoder = record_encoder(copy)
    assert encoder.fallback_reason is None

    def refuse(records: list[dict[str, Any]]) -> pl.DataFrame:
        raise AssertionError("the fast path deferred to the polars path")

    monkeypatch.setattr(copy, "transform_records", refuse)
    return encoder


@pytest.mark.parametrize("one_at_a_time", [False, True], ids=["one batch", "row by row"])
@pytest.mark.parametrize("spec_name", ["example_spec", "edge_spec"])
def test_all_adult_test_rows_match_the_polars_path(
    request: pytest.FixtureRequest,
    adult_test: pl.DataFrame,
    spec_name: str,
    one_at_a_time: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = request.getfixturevalue(spec_name)
    records = _records(adult_test, spec)
    expected = _reference(spec, records)
    encoder = _fast_only(spec, monkeypatch)
    if one_at_a_time:
        actual = np.concatenate([encoder.encode([record]) for record in records])
    else:
        actual = encoder.encode(records)
    _assert_same_bits(actual, expected)


@pytest.mark.parametrize("spec_name", ["example_spec", "edge_spec"])
def test_a_record_of_nulls_only_matches(
    request: pytest.FixtureRequest, spec_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = request.getfixturevalue(spec_name)
    records = [dict.fromkeys(spec.input_columns)]
    expected = _reference(spec, records)
    assert expected.shape[1] == len([c for c in spec.output_columns if c != "sex"])
    _assert_same_bits(_fast_only(spec, monkeypatch).encode(records), expected)


EDGE_VALUES = [
    {"age": None},
    {"ratio": None},
    {"ratio": float("nan")},
    {"ratio": 3},
    {"ratio": -(2**53)},
    {"ratio": float("inf")},
    {"ratio": 1e300},
    {"ratio32": 0.1},
    {"ratio32": 2**24},
    {"ratio32": 1e300},
    {"ratio32": None},
    {"workclass": None},
    {"workclass": "Moon-base"},
    {"workclass": "__null__"},
    {"workclass": "__other__"},
    {"education": "Bachelors"},
    {"education": "11th"},
    {"education": None},
    {"occupation": None},
    {"occupation": "Astronaut"},
    {"native-country": None},
    {"native-country": "Atlantis"},
    {"race": "Ünïcode-ß 国"},
    {"race": ""},
    {"sex": None},
    {"fnlwgt": 2**62 + 2**38 + 1},  # cast straight to float32; through float64 it rounds down
    {"fnlwgt": -(2**63)},
    {"fnlwgt": None},
    {"weight": -0.0},
    {"weight": float("nan")},
    {"weight": None},
    {"flag": None},
    {"flag": False},
]


@pytest.mark.parametrize("change", EDGE_VALUES, ids=repr)
def test_edge_values_take_the_fast_path_and_match(
    edge_spec: FeatureSpec,
    adult_test: pl.DataFrame,
    change: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = _records(adult_test.head(3), edge_spec)
    records = [base[0] | change, base[1], base[2] | change]
    expected = _reference(edge_spec, records)
    _assert_same_bits(_fast_only(edge_spec, monkeypatch).encode(records), expected)


def test_random_floats_match_bit_for_bit(
    edge_spec: FeatureSpec, adult_test: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    base = _records(adult_test.head(1), edge_spec)[0]
    magnitudes = 10.0 ** rng.integers(-30, 30, size=3000)
    values = (rng.standard_normal(3000) * magnitudes).tolist()
    ints = rng.integers(-(2**62), 2**62, size=3000).tolist()
    records = [
        base | {"ratio": a, "ratio32": b, "weight": c, "fnlwgt": n}
        for a, b, c, n in zip(values, values[::-1], values[1:] + values[:1], ints, strict=True)
    ]
    expected = _reference(edge_spec, records)
    _assert_same_bits(_fast_only(edge_spec, monkeypatch).encode(records), expected)


def test_boolean_and_narrow_integer_columns_match(
    adult_train: pl.DataFrame, adult_test: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow = [pl.col("education-num").cast(pl.Int8), pl.col("capital-loss").cast(pl.UInt16)]
    config = {
        "features": [
            {"column": "flag", "kind": "minmax"},
            {"column": "education-num", "kind": "standardize"},
        ],
        "passthrough": ["capital-loss"],
    }
    spec = FeatureSpec.fit(
        adult_train.with_columns(narrow), parse_model(FeatureSpecConfig, config, "narrow")
    )
    records = _records(adult_test.with_columns(narrow), spec)
    expected = _reference(spec, records)
    _assert_same_bits(_fast_only(spec, monkeypatch).encode(records), expected)
    with pytest.raises(InvalidDataError):
        record_encoder(spec).encode([records[0] | {"education-num": 128}])


# Values polars takes but converts in ways the fast path does not copy: the call defers.
@pytest.mark.parametrize(
    "change",
    [
        {"age": True},
        {"age": np.int64(41)},
        {"ratio": 2**60 + 1},
        {"ratio32": 2**24 + 1},
        {"ratio": np.float64(0.25)},
        {"flag": np.bool_(True)},
    ],
    ids=repr,
)
def test_unusual_accepted_values_defer_to_polars_and_match(
    edge_spec: FeatureSpec,
    adult_test: pl.DataFrame,
    change: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records = [record | change for record in _records(adult_test.head(2), edge_spec)]
    copy = FeatureSpec.from_dict(edge_spec.to_dict())
    encoder = record_encoder(copy)
    calls: list[int] = []
    polars_path = copy.transform_records

    def counted(batch: list[dict[str, Any]]) -> pl.DataFrame:
        calls.append(len(batch))
        return polars_path(batch)

    monkeypatch.setattr(copy, "transform_records", counted)
    _assert_same_bits(encoder.encode(records), _reference(edge_spec, records))
    assert calls == [2]  # the whole batch went through the polars path


def test_target_in_a_record_is_checked_as_the_polars_path_does(
    edge_spec: FeatureSpec, adult_test: pl.DataFrame
) -> None:
    record = _records(adult_test.head(1), edge_spec)[0]
    encoder = record_encoder(edge_spec)
    labelled = [record | {"Y": "<=50K"}]
    _assert_same_bits(encoder.encode(labelled), _reference(edge_spec, labelled))
    with pytest.raises(InvalidDataError) as error:
        encoder.encode([record | {"Y": 5}])
    assert "'Y'" in str(error.value)


@pytest.mark.parametrize(
    "change",
    [
        {"age": "forty"},
        {"age": 41.0},
        {"age": 2**63},
        {"workclass": 3},
        {"workclass": b"Private"},
        {"race": "\ud800"},
        {"flag": 1},
        {"ratio": "0.5"},
    ],
    ids=repr,
)
def test_bad_values_raise_what_the_polars_path_raises(
    edge_spec: FeatureSpec, adult_test: pl.DataFrame, change: dict[str, Any]
) -> None:
    records = [record | change for record in _records(adult_test.head(2), edge_spec)]
    with pytest.raises(InvalidDataError) as expected:
        _reference(edge_spec, records)
    with pytest.raises(InvalidDataError) as error:
        record_encoder(edge_spec).encode(records)
    assert type(error.value) is type(expected.value)
    assert str(error.value) == str(expected.value)
    assert str(error.value).endswith(".")
    assert "\n" not in str(error.value)


def test_missing_field_raises_what_the_polars_path_raises(
    example_spec: FeatureSpec, adult_test: pl.DataFrame
) -> None:
    records = _records(adult_test.head(3), example_spec)
    del records[2]["native-country"]
    with pytest.raises(MissingColumnError) as error:
        record_encoder(example_spec).encode(records)
    assert "Record 2" in str(error.value)
    assert "'native-country'" in str(error.value)
    with pytest.raises(MissingColumnError) as expected:
        _reference(example_spec, records)
    assert str(error.value) == str(expected.value)


@pytest.mark.parametrize("spec_name", ["example_spec", "edge_spec"])
def test_no_records_give_an_empty_matrix(
    request: pytest.FixtureRequest, spec_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = request.getfixturevalue(spec_name)
    expected = _reference(spec, [])
    assert expected.shape == (0, len([c for c in spec.output_columns if c != "sex"]))
    _assert_same_bits(_fast_only(spec, monkeypatch).encode([]), expected)


def _with_dates_and_text(frame: pl.DataFrame) -> pl.DataFrame:
    day = pl.int_range(pl.len()) % 28 + 1
    return frame.with_columns(
        when=pl.format("2021-02-{}", day.cast(pl.String).str.zfill(2)),
        sentence=pl.format("{} works as {}", pl.col("relationship"), pl.col("occupation")),
    )


@pytest.mark.parametrize(
    ("feature", "reason"),
    [
        ({"column": "when", "kind": "date_parts", "parts": ["year", "month", "weekday"]}, "date"),
        ({"column": "sentence", "kind": "tokenize", "vocab_size": 50, "max_length": 8}, "token"),
        ({"column": "education-num", "kind": "onehot"}, "Int64"),
        ({"column": "age", "kind": "hash", "buckets": 4}, "Int64"),
    ],
)
def test_specs_the_fast_path_cannot_copy_fall_back_and_still_match(
    adult_train: pl.DataFrame, adult_test: pl.DataFrame, feature: dict[str, Any], reason: str
) -> None:
    config = {
        "features": [{"column": "workclass", "kind": "onehot"}, feature],
        "passthrough": ["fnlwgt"],
    }
    spec = FeatureSpec.fit(
        _with_dates_and_text(adult_train), parse_model(FeatureSpecConfig, config, "fallback")
    )
    encoder = record_encoder(spec)
    assert encoder.fallback_reason is not None
    assert reason in encoder.fallback_reason
    records = _records(_with_dates_and_text(adult_test).head(200), spec)
    if "when" in spec.input_columns:
        records[3]["when"] = "not a date"
    expected = _reference(spec, records)
    _assert_same_bits(encoder.encode(records), expected)
    _assert_same_bits(encoder.encode(records[3:4]), expected[3:4])
