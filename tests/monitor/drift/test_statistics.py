from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs
from scipy import stats
from scipy.spatial import distance

from forgeml.monitor.drift import _statistics as st

counts = hs.lists(hs.integers(min_value=0, max_value=10_000), min_size=2, max_size=12)


def test_psi_matches_the_hand_computed_value_at_large_counts() -> None:
    # shares 0.5/0.5 -> 0.25/0.75: (0.25-0.5) ln(0.25/0.5) + (0.75-0.5) ln(0.75/0.5)
    expected = -0.25 * math.log(0.5) + 0.25 * math.log(1.5)

    found = st.psi([500_000, 500_000], [250_000, 750_000])

    assert found == pytest.approx(expected, rel=1e-5)


def test_psi_counts_an_empty_bin_as_a_share_of_1e_4() -> None:
    expected = (0.5 - 1.0) * math.log(0.5 / 1.0) + (0.5 - 1e-4) * math.log(0.5 / 1e-4)

    assert st.psi([100, 0], [50, 50]) == pytest.approx(expected)


def test_psi_of_a_small_window_is_not_lifted_by_bins_both_sides_leave_empty() -> None:
    assert st.psi([0, 500_000, 500_000, 0], [0, 50, 50, 0]) == pytest.approx(0.0, abs=1e-12)


def test_psi_needs_counts_on_both_sides() -> None:
    with pytest.raises(ValueError, match="both sides"):
        st.psi([0, 0], [1, 2])


def test_psi_of_identical_shares_is_zero() -> None:
    assert st.psi([10, 20, 30], [20, 40, 60]) == pytest.approx(0.0, abs=1e-12)


@given(counts.filter(lambda c: sum(c) > 0), hs.data())
def test_psi_is_never_negative(reference: list[int], data: hs.DataObject) -> None:
    current = data.draw(
        hs.lists(
            hs.integers(min_value=0, max_value=10_000),
            min_size=len(reference),
            max_size=len(reference),
        ).filter(lambda c: sum(c) > 0)
    )

    assert st.psi(reference, current) >= 0.0


def test_js_distance_matches_scipy() -> None:
    p, q = [10, 20, 70], [30, 30, 40]

    expected = distance.jensenshannon(np.array(p) / 100, np.array(q) / 100, base=2)

    assert st.js_distance(p, q) == pytest.approx(expected, rel=1e-12)


def test_js_distance_of_disjoint_supports_is_one() -> None:
    assert st.js_distance([5, 0], [0, 7]) == pytest.approx(1.0)


def test_js_distance_needs_counts_on_both_sides() -> None:
    with pytest.raises(ValueError, match="both sides"):
        st.js_distance([0, 0], [1, 2])


@given(counts.filter(lambda c: sum(c) > 0), hs.data())
def test_js_distance_is_symmetric_and_within_zero_and_one(
    reference: list[int], data: hs.DataObject
) -> None:
    current = data.draw(
        hs.lists(
            hs.integers(min_value=0, max_value=10_000),
            min_size=len(reference),
            max_size=len(reference),
        ).filter(lambda c: sum(c) > 0)
    )

    forward, backward = st.js_distance(reference, current), st.js_distance(current, reference)

    assert 0.0 <= forward <= 1.0
    assert forward == pytest.approx(backward, abs=1e-12)
    assert st.js_distance(reference, reference) == pytest.approx(0.0, abs=1e-7)


def test_chi_square_matches_scipy_and_drops_categories_empty_on_both_sides() -> None:
    reference, current = [120, 0, 80, 40], [50, 0, 60, 10]

    expected = stats.chi2_contingency([[120, 80, 40], [50, 60, 10]], correction=False)

    assert st.chi_square(reference, current) == pytest.approx((expected.statistic, expected.pvalue))


@pytest.mark.parametrize(
    ("reference", "current"), [([10, 0], [5, 0]), ([0, 0], [3, 4]), ([7], [9])]
)
def test_chi_square_with_nothing_to_compare_is_no_evidence(
    reference: list[int], current: list[int]
) -> None:
    assert st.chi_square(reference, current) == (0.0, 1.0)


def test_ks_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=2_000), rng.normal(0.2, size=1_500)

    expected = stats.ks_2samp(a, b, method="asymp")

    assert st.ks(a, b) == pytest.approx((expected.statistic, expected.pvalue))


def test_wasserstein_of_a_shifted_sample_is_the_shift_in_units_of_scale() -> None:
    sample = np.random.default_rng(1).normal(size=1_000)

    assert st.wasserstein(sample, sample + 3.0, scale=2.0) == pytest.approx(1.5)


def test_share_test_matches_a_two_by_two_chi_square() -> None:
    expected = stats.chi2_contingency([[30, 970], [60, 940]], correction=False).pvalue

    assert st.share_test(30, 1_000, 60, 1_000) == pytest.approx(expected)
    assert st.share_test(0, 1_000, 0, 50) == 1.0


@pytest.mark.parametrize("kind", ["normal", "poisson"])
def test_ks_and_wasserstein_from_quantiles_match_the_full_samples(kind: str) -> None:
    rng = np.random.default_rng(3)
    draw = {"normal": lambda n: rng.normal(size=n), "poisson": lambda n: rng.poisson(3.0, n)}
    reference, current = draw[kind](100_000).astype(float), draw[kind](5_000) + 0.1
    quantiles = np.quantile(reference, (np.arange(256) + 0.5) / 256, method="inverted_cdf")

    statistic, p_value = st.ks_against_quantiles(quantiles, len(reference), current)
    exact = stats.ks_2samp(reference, current, method="asymp")

    assert statistic == pytest.approx(exact.statistic, abs=0.002)
    assert np.log10(p_value) == pytest.approx(np.log10(exact.pvalue), rel=0.2, abs=0.5)
    w = st.wasserstein_against_quantiles(quantiles, current, 1.0)
    assert w == pytest.approx(stats.wasserstein_distance(reference, current), rel=0.1)


def test_ks_against_quantiles_rejects_no_drift_at_about_alpha() -> None:
    # a step CDF through the quantiles would be off by up to 1/(2m): at 10,000 rows that
    # alone rejected ~7% of no-drift windows at alpha 0.05
    rng = np.random.default_rng(5)
    reference = rng.normal(size=100_000)
    quantiles = np.quantile(reference, (np.arange(256) + 0.5) / 256, method="inverted_cdf")

    p_values = [
        st.ks_against_quantiles(quantiles, len(reference), rng.normal(size=10_000))[1]
        for _ in range(200)
    ]

    assert 0.02 <= np.mean(np.array(p_values) < 0.05) <= 0.08


def test_the_sketched_cdf_jumps_at_atoms_and_runs_linearly_between_single_values() -> None:
    # a grid of 8: 0 four times (an atom of half the mass), then 1, 2, 3, 4 once each
    quantiles = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0])
    points = np.array([-1.0, 0.0, 0.5, 1.0, 1.5, 4.0, 5.0])

    left, right = st._reference_cdf(quantiles, points)

    assert left.tolist() == pytest.approx(
        [0.0, 0.0, 0.5 + 0.25 / 8, 4.5 / 8, 5.0 / 8, 7.5 / 8, 1.0]
    )
    assert right.tolist() == pytest.approx(
        [0.0, 0.5, 0.5 + 0.25 / 8, 4.5 / 8, 5.0 / 8, 7.5 / 8, 1.0]
    )
