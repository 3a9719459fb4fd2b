"""LTTB downsampling: the endpoints and spikes survive, the count is bounded, and a short
curve passes unchanged."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forgeml.tracking.lttb import MAX_POINTS, lttb


def test_a_short_curve_passes_unchanged() -> None:
    points = [(float(i), float(i * i)) for i in range(50)]
    assert lttb(points, 50) == points


def test_a_long_curve_keeps_its_ends_and_its_spike() -> None:
    points = [(float(i), math.sin(i / 500)) for i in range(100_000)]
    points[61_234] = (61_234.0, 25.0)
    kept = lttb(points)
    assert len(kept) == MAX_POINTS
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert (61_234.0, 25.0) in kept


def test_the_reference_choice_on_a_small_curve() -> None:
    # 4 inner points in 3 buckets of 4/3: [1], [2], [3, 4]; in the last, from (2, 1) toward
    # the end (5, 0), (3, 5) spans a triangle of twice 13 and (4, 0) one of twice 1
    points = [(0.0, 0.0), (1.0, 1.0), (2.0, 1.0), (3.0, 5.0), (4.0, 0.0), (5.0, 0.0)]
    assert lttb(points, 5) == [(0.0, 0.0), (1.0, 1.0), (2.0, 1.0), (3.0, 5.0), (5.0, 0.0)]


def test_a_threshold_below_three_is_refused() -> None:
    with pytest.raises(ValueError, match="< 3"):
        lttb([(0.0, 0.0)] * 10, 2)


@given(
    st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=400),
    st.integers(3, 120),
)
def test_kept_points_are_in_order_and_bounded(values: list[float], threshold: int) -> None:
    points = [(float(i), v) for i, v in enumerate(values)]
    kept = lttb(points, threshold)
    assert len(kept) == min(len(points), threshold)
    xs = [x for x, _ in kept]
    assert xs == sorted(set(xs))
    assert set(kept) <= set(points)
