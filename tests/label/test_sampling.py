from __future__ import annotations

import numpy as np
import pytest

from forgeml.label import label_order, uncertainty

# three items, three classes: sure, torn between two, uniform
PROBS = np.array([[0.9, 0.05, 0.05], [0.45, 0.45, 0.1], [1 / 3, 1 / 3, 1 / 3]])


def test_least_confidence_is_one_minus_the_top_probability() -> None:
    assert uncertainty(PROBS, "least-confidence") == pytest.approx([0.1, 0.55, 2 / 3])


def test_margin_ranks_a_tie_between_two_classes_first() -> None:
    # margins 0.85, 0.0, 0.0: the two torn items before the sure one
    assert uncertainty(PROBS, "margin") == pytest.approx([-0.85, 0.0, 0.0])


def test_entropy_matches_its_definition() -> None:
    expected = [-(row * np.log(row)).sum() for row in PROBS]
    assert uncertainty(PROBS, "entropy") == pytest.approx(expected)
    assert uncertainty(PROBS, "entropy")[2] == pytest.approx(np.log(3))


@pytest.mark.parametrize("strategy", ["least-confidence", "entropy"])
def test_uncertainty_order_puts_the_least_sure_first(strategy: str) -> None:
    order = label_order(3, strategy, np.random.default_rng(0), PROBS)  # type: ignore[arg-type]
    assert order == [2, 1, 0]


def test_random_order_is_a_seeded_permutation() -> None:
    first = label_order(50, "random", np.random.default_rng(7))
    assert sorted(first) == list(range(50))
    assert first == label_order(50, "random", np.random.default_rng(7))
    assert first != label_order(50, "random", np.random.default_rng(8))


def test_ties_are_broken_at_random_not_by_position() -> None:
    flat = np.full((40, 2), 0.5)
    orders = {tuple(label_order(40, "margin", np.random.default_rng(s), flat)) for s in range(3)}
    assert len(orders) == 3


def test_uncertainty_needs_probabilities_for_every_item() -> None:
    with pytest.raises(ValueError, match="one row of probabilities per item"):
        label_order(4, "entropy", np.random.default_rng(0), PROBS)
