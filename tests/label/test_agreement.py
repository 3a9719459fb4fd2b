from __future__ import annotations

import numpy as np
import pytest

from forgeml.label import cohen_kappa, fleiss_kappa

# Fleiss (1971) as worked on Wikipedia's "Fleiss' kappa" page: 10 subjects, 14 raters,
# 5 categories; P = 0.378, P_e = 0.213, kappa = 0.210
WIKIPEDIA_TABLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def test_fleiss_kappa_matches_the_worked_example() -> None:
    assert fleiss_kappa(WIKIPEDIA_TABLE) == pytest.approx(0.20993, abs=1e-5)


def test_fleiss_kappa_with_two_raters_equals_scotts_pi() -> None:
    # two raters: Fleiss' kappa is Scott's pi, (p_o - p_e) / (1 - p_e) with pooled shares
    a = ["x", "x", "y", "y", "x", "y", "x", "x"]
    b = ["x", "y", "y", "y", "x", "x", "x", "x"]
    table = np.array([[(a[i] == c) + (b[i] == c) for c in "xy"] for i in range(len(a))])
    observed = np.mean([p == q for p, q in zip(a, b, strict=True)])
    shares = np.array([(a + b).count(c) for c in "xy"]) / 16
    expected = (shares**2).sum()
    assert fleiss_kappa(table) == pytest.approx((observed - expected) / (1 - expected))


def test_fleiss_kappa_refuses_unequal_ratings() -> None:
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa(np.array([[2, 0], [1, 0]]))


def test_cohen_kappa_matches_a_hand_computed_value() -> None:
    # 50 items: both yes 20, both no 15, a yes / b no 5, a no / b yes 10
    # p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_kappa_of_one_shared_category_is_complete_agreement() -> None:
    assert cohen_kappa(["a", "a"], ["a", "a"]) == 1.0
