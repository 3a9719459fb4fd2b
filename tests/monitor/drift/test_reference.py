from __future__ import annotations

import datetime as dt
import json

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as hs

from forgeml.core.errors import EmptyWindowError, InvalidDataError, MissingColumnError
from forgeml.monitor.drift import (
    CategoricalReference,
    NumericReference,
    ReferenceOptions,
    ReferenceProfile,
    build_reference,
    detect_drift,
)
from forgeml.monitor.drift._reference import (
    StaleReferenceError,
    bin_counts,
    cumulative_counts,
    finite_columns,
)
from tests.monitor.drift.conftest import mixed_frame


def _numeric(profile: ReferenceProfile, name: str) -> NumericReference:
    column = profile.columns[name]
    assert isinstance(column, NumericReference)
    return column


def _categorical(profile: ReferenceProfile, name: str) -> CategoricalReference:
    column = profile.columns[name]
    assert isinstance(column, CategoricalReference)
    return column


def test_numeric_columns_get_quantile_bins_that_count_every_finite_value() -> None:
    frame = mixed_frame(50_000, seed=0)

    profile = build_reference(frame, ReferenceOptions(bins=10, sample_size=5_000))

    x = _numeric(profile, "x")
    assert x.edges == sorted(set(x.edges))
    assert sum(x.counts) == 50_000
    assert len(x.counts) == len(x.edges) + 1
    assert x.counts[0] == 0  # below the minimum
    assert x.counts[-1] == 0  # above the maximum
    inner = np.array(x.counts[1:-1]) / 50_000
    assert inner == pytest.approx(np.full(10, 0.1), abs=0.02)
    assert len(x.quantiles) == 256 and x.sketched == 5_000
    assert x.quantiles == sorted(x.quantiles)
    assert x.std == pytest.approx(float(frame["x"].std()))


def test_a_mass_point_gets_a_bin_of_its_own() -> None:
    frame = pl.DataFrame({"constant": [3.0] * 1_000, "binary": [0] * 700 + [1] * 300})

    profile = build_reference(frame)

    constant = _numeric(profile, "constant")
    assert constant.edges == [3.0, float(np.nextafter(3.0, np.inf))]
    assert constant.counts == [0, 1_000, 0]
    assert _numeric(profile, "binary").counts == [0, 700, 300, 0]


def test_missing_values_are_counted_apart_from_the_bins() -> None:
    frame = pl.DataFrame({"v": [1.0, None, float("nan"), float("inf"), 2.0, 3.0]})

    v = _numeric(build_reference(frame), "v")

    assert v.missing == 3
    assert sum(v.counts) == 3
    assert v.sketched == 3 and set(v.quantiles) == {1.0, 2.0, 3.0}


def test_categorical_columns_keep_the_top_k_and_lump_the_rest() -> None:
    values = ["a"] * 50 + ["b"] * 30 + ["c"] * 15 + ["d"] * 5 + [None] * 4
    frame = pl.DataFrame({"cat": values, "flag": [True, False] * 52})

    profile = build_reference(frame, ReferenceOptions(top_k=2))

    cat = _categorical(profile, "cat")
    assert cat.categories == {"a": 50, "b": 30}
    assert cat.other == 20
    assert cat.missing == 4
    assert _categorical(profile, "flag").categories == {"false": 52, "true": 52}


def test_the_samples_are_bounded_and_seeded() -> None:
    frame = mixed_frame(30_000, seed=2)
    options = ReferenceOptions(sample_size=1_000, row_sample_size=300, seed=7)

    first, again = build_reference(frame, options), build_reference(frame, options)
    other = build_reference(frame, options.model_copy(update={"seed": 8}))

    assert _numeric(first, "x").sketched == 1_000
    assert _numeric(first, "x").quantiles == _numeric(again, "x").quantiles
    assert _numeric(first, "x").quantiles != _numeric(other, "x").quantiles
    assert {len(values) for values in first.row_sample.values()} == {300}
    assert first.row_sample == again.row_sample != other.row_sample
    assert list(first.row_sample) == first.features


def test_reserved_and_unsupported_columns_are_left_out() -> None:
    frame = mixed_frame(100, seed=3).with_columns(
        __split__=pl.lit("train"), day=pl.lit(dt.date(2024, 1, 1))
    )

    profile = build_reference(frame)

    assert "__split__" not in profile.columns
    assert profile.skipped == {"day": "Date"}
    assert profile.features == ["x", "skewed", "count", "color", "flag"]


def test_the_reference_round_trips_through_json() -> None:
    frame = mixed_frame(20_000, seed=4).with_columns(pred=pl.col("x") > 0)
    profile = build_reference(frame, ReferenceOptions(sample_size=2_000), prediction="pred")

    loaded = ReferenceProfile.from_json(profile.to_json())

    assert loaded == profile
    assert loaded.features == ["x", "skewed", "count", "color", "flag"]
    current = mixed_frame(5_000, seed=5, shift=0.5).with_columns(pred=pl.col("x") > 0)
    assert detect_drift(loaded, current) == detect_drift(profile, current)


def test_the_quantile_sketch_matches_numpys_quantiles_of_the_column() -> None:
    frame = mixed_frame(20_000, seed=6)

    x = _numeric(build_reference(frame, ReferenceOptions(sample_size=20_000, quantiles=64)), "x")

    grid = (np.arange(64) + 0.5) / 64
    expected = np.quantile(frame["x"].to_numpy(), grid, method="inverted_cdf")
    assert x.quantiles == pytest.approx(expected, rel=1e-6)


def test_the_sketch_is_a_fraction_of_a_sample_profile_in_json() -> None:
    frame = mixed_frame(200_000, seed=7)

    profile = build_reference(frame)

    # format 1 kept 10,000 values per numeric column: about 600 kB for these three
    assert len(profile.to_json()) < 80_000


def test_a_profile_of_an_older_format_is_refused_as_stale() -> None:
    old = build_reference(mixed_frame(1_000, seed=8)).model_dump(mode="json")
    old["format"] = 1

    with pytest.raises(StaleReferenceError, match=r"^The drift reference has format 1, not 2;"):
        ReferenceProfile.from_json(json.dumps(old))


def test_free_text_columns_are_told_from_categories() -> None:
    frame = mixed_frame(500, seed=9).with_columns(
        review=pl.format("review number {} of {}", pl.int_range(500), pl.col("color"))
    )

    profile = build_reference(frame)

    assert profile.text_columns == ["review"]


def test_text_that_is_not_a_profile_names_what_is_wrong() -> None:
    with pytest.raises(InvalidDataError, match=r"^Not a drift reference profile: rows: "):
        ReferenceProfile.from_json('{"options": {}, "columns": {}}')


def test_an_empty_reference_is_refused_in_one_sentence() -> None:
    with pytest.raises(EmptyWindowError, match=r"^The reference data has no rows; .*\.$"):
        build_reference(mixed_frame(0, seed=0))


def test_a_missing_column_is_named() -> None:
    with pytest.raises(MissingColumnError, match="'nope'"):
        build_reference(mixed_frame(10, seed=0), columns=["x", "nope"])


def test_a_prediction_of_an_unsupported_type_is_refused() -> None:
    frame = pl.DataFrame({"x": [1.0, 2.0], "when": [dt.date(2024, 1, 1)] * 2})

    with pytest.raises(InvalidDataError, match="prediction column 'when'"):
        build_reference(frame, prediction="when")


@given(
    hs.lists(
        hs.one_of(hs.none(), hs.floats(allow_nan=True, allow_infinity=True, width=32)),
        min_size=1,
        max_size=200,
    ),
    hs.lists(hs.floats(-1e6, 1e6, width=32), min_size=0, max_size=12, unique=True),
)
def test_bin_counts_equal_numpys_search_of_the_edges(
    values: list[float | None], edges: list[float]
) -> None:
    edges = sorted(edges)
    frame = pl.DataFrame({"v": values}, schema={"v": pl.Float64})

    clean = finite_columns(frame, ["v"])
    counts = [e.alias(str(k)) for k, e in enumerate(cumulative_counts("v", edges))]
    found = bin_counts(list(clean.select(counts).row(0)))

    finite_values = np.array([v for v in values if v is not None and np.isfinite(v)])
    bins = np.searchsorted(np.array(edges), finite_values, side="right")
    assert found == np.bincount(bins, minlength=len(edges) + 1).tolist()
