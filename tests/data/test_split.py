from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError, InvalidDataError, MissingColumnError
from forgeml.data._frame import SPLIT_COLUMN, SPLIT_NAMES
from forgeml.data.split import SplitParams, _exact_ids, _first_appearance_ids, apply


def is_one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and len(message) < 300


def splits_of(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """How many distinct splits each distinct value of `keys` landed in."""
    return frame.group_by(keys).agg(pl.col(SPLIT_COLUMN).n_unique().alias("n"))


@pytest.fixture
def distinct() -> pl.DataFrame:
    rng = np.random.default_rng(7)
    return pl.DataFrame({"id": np.arange(10_000), "x": rng.random(10_000)})


@pytest.fixture(scope="module")
def adult(shared_data: Path) -> pl.DataFrame:
    frame = pl.read_csv(shared_data / "adult" / "adult.data", infer_schema=False).rename(str.strip)
    return frame.select(pl.all().str.strip_chars())


def test_adds_split_column_and_orders_rows(distinct: pl.DataFrame) -> None:
    output = apply(distinct, SplitParams())
    frame = output.frame
    assert frame.columns == [*distinct.columns, SPLIT_COLUMN]
    assert frame.schema[SPLIT_COLUMN] == pl.String
    assert frame.height == distinct.height
    assert frame.drop(SPLIT_COLUMN).sort("id").equals(distinct)
    rank = frame[SPLIT_COLUMN].replace_strict({"train": 0, "validation": 1, "test": 2})
    assert rank.is_sorted()
    for name in SPLIT_NAMES:
        assert frame.filter(pl.col(SPLIT_COLUMN) == name)["id"].is_sorted()


@pytest.mark.parametrize("ratios", [[0.8, 0.1, 0.1], [0.7, 0.3], [0.6, 0.25, 0.15]])
def test_ratios_are_honoured(distinct: pl.DataFrame, ratios: list[float]) -> None:
    output = apply(distinct, SplitParams(ratios=ratios))
    names = ("train", "test") if len(ratios) == 2 else SPLIT_NAMES
    assert list(output.report["rows"]) == list(names)
    assert set(output.frame[SPLIT_COLUMN].unique()) == set(names)
    for name, ratio in zip(names, ratios, strict=True):
        assert abs(output.report["rows"][name] - ratio * distinct.height) <= 1
        assert output.report["groups"][name] == output.report["rows"][name]


def test_ratios_accept_the_cli_text() -> None:
    assert SplitParams(ratios="0.8, 0.1,0.1").ratios == [0.8, 0.1, 0.1]


def test_same_seed_same_split_other_seed_other_split(distinct: pl.DataFrame) -> None:
    first = apply(distinct, SplitParams(seed=1))
    again = apply(distinct, SplitParams(seed=1))
    other = apply(distinct, SplitParams(seed=2))
    assert first.frame.equals(again.frame)
    assert first.report == again.report
    assert not first.frame.equals(other.frame)


def test_identical_records_share_a_split() -> None:
    rows = {"a": [1, 2, 3, 4] * 50, "b": ["x", "y", None, "x"] * 50}
    output = apply(pl.DataFrame(rows), SplitParams(ratios=[0.5, 0.5]))
    assert splits_of(output.frame, ["a", "b"])["n"].max() == 1
    assert sum(output.report["groups"].values()) == 4


def test_group_never_spans_splits_and_nulls_are_one_group() -> None:
    rng = np.random.default_rng(3)
    patients = rng.integers(0, 300, 5_000).astype(float)
    patients[::50] = np.nan
    frame = pl.DataFrame({"patient": patients, "v": rng.random(5_000)})
    frame = frame.with_columns(pl.col("patient").fill_nan(None))
    output = apply(frame, SplitParams(group="patient"))
    assert splits_of(output.frame, ["patient"])["n"].max() == 1
    assert output.report["group_by"] == "patient"
    assert sum(output.report["groups"].values()) == frame["patient"].n_unique()
    for name, ratio in zip(SPLIT_NAMES, [0.8, 0.1, 0.1], strict=True):
        assert abs(output.report["rows"][name] / frame.height - ratio) < 0.03


@pytest.mark.parametrize("column", ["Y", "sex"])
def test_stratify_keeps_class_proportions_on_adult(adult: pl.DataFrame, column: str) -> None:
    output = apply(adult, SplitParams(stratify=column))
    overall = adult[column].value_counts(normalize=True)
    for name in SPLIT_NAMES:
        part = output.frame.filter(pl.col(SPLIT_COLUMN) == name)[column]
        shares = part.value_counts(normalize=True).join(overall, on=column)
        gaps = (shares["proportion"] - shares["proportion_right"]).abs().to_numpy()
        assert gaps.max() < 0.002
        reported = output.report["class_balance"][name]
        assert reported.keys() == set(overall[column])
    assert output.report["warnings"] == []
    assert splits_of(output.frame, adult.columns)["n"].max() == 1
    json.dumps(output.report)


def test_stratify_with_group_keeps_groups_whole() -> None:
    rng = np.random.default_rng(11)
    users = rng.integers(0, 2_000, 20_000)
    label = (users % 4 == 0).astype(int)  # each user has one label; 25 % positive
    frame = pl.DataFrame({"user": users, "label": label, "x": rng.random(20_000)})
    output = apply(frame, SplitParams(stratify="label", group="user"))
    assert splits_of(output.frame, ["user"])["n"].max() == 1
    for name in SPLIT_NAMES:
        assert abs(output.report["class_balance"][name]["1"] - 0.25) < 0.03


def test_small_class_warns_instead_of_failing() -> None:
    frame = pl.DataFrame({"x": list(range(20)), "y": ["a"] * 18 + ["b", "c"]})
    output = apply(frame, SplitParams(stratify="y"))
    assert output.frame.height == 20
    (warning,) = output.report["warnings"]
    assert "'b' (1)" in warning and "'c' (1)" in warning
    assert is_one_sentence(warning)


def test_existing_split_is_replaced_and_reported(distinct: pl.DataFrame) -> None:
    once = apply(distinct, SplitParams(ratios=[0.5, 0.5])).frame
    twice = apply(once, SplitParams(seed=5))
    assert twice.report["resplit"] is True
    assert "replaces" in twice.report["warnings"][0]
    assert twice.frame.columns.count(SPLIT_COLUMN) == 1
    assert set(twice.frame[SPLIT_COLUMN].unique()) == set(SPLIT_NAMES)
    assert apply(distinct, SplitParams()).report["resplit"] is False


def test_augmented_rows_raise(distinct: pl.DataFrame) -> None:
    frame = distinct.with_columns(__augmented__=pl.col("id") == 3)
    with pytest.raises(InvalidDataError, match=r"^split before augmenting") as error:
        apply(frame, SplitParams())
    assert is_one_sentence(str(error.value))


def test_unaugmented_flag_is_kept(distinct: pl.DataFrame) -> None:
    frame = distinct.with_columns(__augmented__=pl.lit(False))
    output = apply(frame, SplitParams())
    assert output.frame.columns == ["id", "x", "__augmented__", SPLIT_COLUMN]


def test_empty_frame_raises() -> None:
    with pytest.raises(InvalidDataError, match="empty") as error:
        apply(pl.DataFrame({"a": []}, schema={"a": pl.Int64}), SplitParams())
    assert is_one_sentence(str(error.value))


@pytest.mark.parametrize("field", ["stratify", "group"])
def test_unknown_column_raises(distinct: pl.DataFrame, field: str) -> None:
    params = SplitParams.model_validate({field: "label"})
    with pytest.raises(MissingColumnError, match="'label'") as error:
        apply(distinct, params)
    assert is_one_sentence(str(error.value))


@pytest.mark.parametrize(
    ("ratios", "words"),
    [
        ([0.8, 0.1], "sum to 1"),
        ([1.2, -0.2], "above 0"),
        ([1.0, 0.0], "above 0"),
        ([1.0], "give 2 ratios"),
        ([0.25, 0.25, 0.25, 0.25], "give 2 ratios"),
        ("0.8,x", "ratios"),
    ],
)
def test_bad_ratios_raise_config_error(ratios: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as error:
        parse_model(SplitParams, {"ratios": ratios}, "recipe.yaml")
    assert is_one_sentence(str(error.value))


def test_negative_seed_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="seed"):
        parse_model(SplitParams, {"seed": -1}, "recipe.yaml")


def test_exact_grouping_agrees_with_hashed_grouping() -> None:
    rng = np.random.default_rng(5)
    keys = pl.DataFrame(
        {"a": rng.integers(0, 5, 3_000), "b": rng.choice(["x", "y", "z"], 3_000)}
    ).with_columns(pl.when(pl.col("a") == 0).then(None).otherwise(pl.col("b")).alias("b"))
    hashed_ids, hashed_firsts = _first_appearance_ids(keys)
    exact_ids, exact_firsts = _exact_ids(keys)
    assert np.array_equal(hashed_ids, exact_ids)
    assert np.array_equal(hashed_firsts, exact_firsts)
    assert hashed_firsts.size == keys.n_unique() == 13
    assert np.array_equal(hashed_ids[hashed_firsts], np.arange(13))
    assert np.all(np.diff(hashed_firsts) > 0)


small_rows = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(["x", "y", None]), st.integers(0, 6)),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(
    rows=small_rows,
    seed=st.integers(0, 2**31),
    ratios=st.sampled_from([[0.8, 0.1, 0.1], [0.5, 0.5], [0.34, 0.33, 0.33]]),
    grouped=st.booleans(),
    stratified=st.booleans(),
)
def test_no_record_or_group_leaks_between_splits(
    rows: list[tuple[int, str | None, int]],
    seed: int,
    ratios: list[float],
    grouped: bool,
    stratified: bool,
) -> None:
    frame = pl.DataFrame(rows, schema={"a": pl.Int64, "b": pl.String, "g": pl.Int64}, orient="row")
    params = SplitParams(
        ratios=ratios,
        seed=seed,
        group="g" if grouped else None,
        stratify="b" if stratified else None,
    )
    output = apply(frame, params)
    assert splits_of(output.frame, ["a", "b", "g"])["n"].max() == 1
    if grouped:
        assert splits_of(output.frame, ["g"])["n"].max() == 1
    assert output.frame.drop(SPLIT_COLUMN).sort(pl.all()).equals(frame.sort(pl.all()))
    assert sum(output.report["rows"].values()) == frame.height
