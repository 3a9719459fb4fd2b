from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from forgeml.core.errors import EmptyWindowError, InvalidDataError, MissingColumnError
from forgeml.monitor.drift import (
    ColumnDrift,
    DriftConfig,
    DriftReport,
    ReferenceOptions,
    build_reference,
    detect_drift,
)
from tests.monitor.drift.conftest import mixed_frame


def _by_column(report: DriftReport) -> dict[str, ColumnDrift]:
    return {result.column: result for result in report.columns}


@pytest.fixture(scope="module")
def reference_frame() -> pl.DataFrame:
    return mixed_frame(500_000, seed=0)


def test_two_large_samples_of_one_distribution_flag_no_column(
    reference_frame: pl.DataFrame,
) -> None:
    reference = build_reference(reference_frame)

    report = detect_drift(reference, mixed_frame(500_000, seed=1))

    assert report.drifted_columns == []
    assert not report.drifted
    for result in report.columns:
        assert result.effect_size is not None
        assert result.psi is not None and result.psi < 0.01, result
        assert not result.missing.drifted


def test_a_half_sigma_mean_shift_is_flagged_in_that_column_only(
    reference_frame: pl.DataFrame,
) -> None:
    reference = build_reference(reference_frame)

    report = detect_drift(reference, mixed_frame(5_000, seed=1, shift=0.5))

    x = _by_column(report)["x"]
    assert report.drifted_columns == ["x"]
    assert x.test == "ks"
    assert x.p_value is not None and x.p_value < 1e-10
    assert x.wasserstein == pytest.approx(0.5, abs=0.05)
    assert x.effect == "wasserstein"
    assert report.drifted_share == pytest.approx(1 / 5)
    assert not report.drifted


def test_a_shift_in_the_category_mix_is_flagged(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame)

    current = mixed_frame(5_000, seed=2, mix=[0.2, 0.3, 0.3, 0.2])
    report = detect_drift(reference, current)

    color = _by_column(report)["color"]
    assert report.drifted_columns == ["color"]
    assert color.test == "chi2"
    assert color.psi is not None and color.psi > 0.1
    assert color.unseen_share == 0.0


def test_a_tiny_shift_at_a_million_rows_is_significant_but_not_drift() -> None:
    rng = np.random.default_rng(3)
    n = 1_000_000
    reference_frame = pl.DataFrame(
        {"x": rng.normal(0, 1, n), "coin": rng.choice(["h", "t"], n, p=[0.5, 0.5])}
    )
    current = pl.DataFrame(
        {"x": rng.normal(0.05, 1, n), "coin": rng.choice(["h", "t"], n, p=[0.51, 0.49])}
    )
    reference = build_reference(reference_frame, ReferenceOptions(sample_size=100_000))

    report = detect_drift(reference, current, DriftConfig(sample_size=100_000))

    for result in report.columns:
        assert result.p_value is not None and result.p_value < 1e-4, result
        assert result.effect_size is not None and result.effect_size < 0.1, result
        assert not result.drifted
    assert report.drifted_columns == []


def test_a_column_whose_missing_share_jumps_is_flagged(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame)
    current = mixed_frame(10_000, seed=4).with_columns(
        x=pl.when(pl.int_range(pl.len()) % 5 == 0).then(None).otherwise(pl.col("x"))
    )

    x = _by_column(detect_drift(reference, current))["x"]

    assert x.missing.current == pytest.approx(0.2)
    assert x.missing.drifted
    assert x.drifted
    assert x.effect_size is not None and x.effect_size < 0.1


def test_unseen_categories_are_counted_and_flagged(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame)
    current = mixed_frame(10_000, seed=5).with_columns(
        color=pl.when(pl.int_range(pl.len()) % 10 < 3).then(pl.lit("new")).otherwise("color")
    )

    color = _by_column(detect_drift(reference, current))["color"]

    assert color.unseen_share == pytest.approx(0.3)
    assert color.drifted


def test_a_constant_column_drifts_only_when_its_value_moves() -> None:
    reference = build_reference(pl.DataFrame({"c": [1.0] * 1_000}))

    same = detect_drift(reference, pl.DataFrame({"c": [1.0] * 500})).columns[0]
    moved = detect_drift(reference, pl.DataFrame({"c": [2.0] * 500})).columns[0]

    assert not same.drifted
    assert same.wasserstein is None
    assert same.note == "constant in the reference: no Wasserstein scale"
    assert moved.drifted
    assert moved.effect in ("psi", "js")


def test_a_column_with_no_values_in_the_window_is_judged_by_its_missing_share(
    reference_frame: pl.DataFrame,
) -> None:
    reference = build_reference(reference_frame)
    current = mixed_frame(1_000, seed=6).with_columns(x=pl.lit(None, dtype=pl.Float64))

    x = _by_column(detect_drift(reference, current))["x"]

    assert x.test == "none"
    assert x.note == "no values in the current window"
    assert x.missing.current == 1.0
    assert x.drifted


def test_prediction_drift_is_judged_apart_from_the_features() -> None:
    frame = mixed_frame(50_000, seed=7).with_columns(score=pl.col("skewed").log())
    reference = build_reference(frame, prediction="score")
    current = mixed_frame(5_000, seed=8).with_columns(score=pl.col("skewed").log() + 0.5)

    report = detect_drift(reference, current)

    assert report.prediction is not None
    assert report.prediction.column == "score"
    assert report.prediction.drifted
    assert "score" not in {result.column for result in report.columns}
    assert report.drifted_columns == []


def test_only_the_chosen_columns_are_checked(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame)

    report = detect_drift(reference, mixed_frame(2_000, seed=9), columns=["color", "x"])

    assert [result.column for result in report.columns] == ["color", "x"]


def test_an_empty_window_is_refused_in_one_sentence(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame.head(1_000))

    with pytest.raises(EmptyWindowError, match=r"^The current window has no rows; [^.]*\.$"):
        detect_drift(reference, reference_frame.head(0))


def test_a_column_missing_from_the_window_is_named(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame.head(1_000))

    with pytest.raises(MissingColumnError, match="names column 'color', which the data"):
        detect_drift(reference, reference_frame.head(100).drop("color"))


def test_a_column_the_reference_lacks_is_named(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame.head(1_000))

    with pytest.raises(MissingColumnError, match="'nope' is not in the reference profile"):
        detect_drift(reference, reference_frame.head(100), columns=["nope"])


def test_a_column_whose_type_changed_is_refused(reference_frame: pl.DataFrame) -> None:
    reference = build_reference(reference_frame.head(1_000))
    current = reference_frame.head(100).with_columns(pl.col("x").cast(pl.String))

    with pytest.raises(InvalidDataError, match="'x' is numeric in the reference but of type"):
        detect_drift(reference, current)
