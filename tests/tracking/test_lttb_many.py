"""The many-curve LTTB (numpy, curves of one length together, given and kept as arrays)
chooses exactly what the plain loop chooses, curve by curve, through either of its paths."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forgeml.tracking import lttb_many
from forgeml.tracking.lttb import lttb
from forgeml.tracking.lttb_many import lttb_arrays

# `lttb_arrays` picks one of these for each group of curves of one length
PATHS = [lttb_many._select_numpy, lttb_many._select_loop]

values = st.one_of(
    st.integers(-1_000, 1_000).map(float),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.just(math.nan),
)


@st.composite
def curve_sets(draw: st.DrawFn) -> tuple[list[list[tuple[float, float]]], int]:
    threshold = draw(st.integers(3, 12))
    lengths = draw(st.lists(st.integers(0, 60), min_size=1, max_size=6))
    # lengths repeat, so some curves share their buckets and go through numpy together
    lengths += draw(st.lists(st.sampled_from(lengths), max_size=4))
    curves = [[(float(i), draw(values)) for i in range(length)] for length in lengths]
    return curves, threshold


def _many(curves: list[list[tuple[float, float]]], threshold: int) -> list[list[tuple]]:
    """`lttb_arrays` of the curves, steps as a chart reads them (int64), back as points."""
    arrays = [
        (np.array([int(x) for x, _ in c], dtype=np.int64), np.array([y for _, y in c]))
        for c in curves
    ]
    kept = lttb_arrays(arrays, threshold)
    assert all(xs.dtype == np.int64 for xs, _ in kept)
    return [list(zip(xs.astype(float).tolist(), ys.tolist(), strict=True)) for xs, ys in kept]


@settings(max_examples=150, deadline=None)
@given(curve_sets())
def test_many_curves_keep_what_the_plain_loop_keeps(
    found: tuple[list[list[tuple[float, float]]], int],
) -> None:
    curves, threshold = found
    fast = _many(curves, threshold)
    slow = [lttb(curve, threshold) for curve in curves]
    # NaN != NaN: compare the points as their reprs
    assert [[repr(p) for p in c] for c in fast] == [[repr(p) for p in c] for c in slow]


@pytest.mark.parametrize("select", PATHS)
@settings(max_examples=150, deadline=None)
@given(curve_sets())
def test_each_path_keeps_what_the_plain_loop_keeps(
    select: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
    found: tuple[list[list[tuple[float, float]]], int],
) -> None:
    curves, threshold = found
    for length in {len(c) for c in curves if len(c) > threshold}:
        group = [c for c in curves if len(c) == length]
        fast = _selected(select, group, threshold)
        slow = [lttb(c, threshold) for c in group]
        assert [[repr(p) for p in c] for c in fast] == [[repr(p) for p in c] for c in slow]


@pytest.mark.parametrize("select", PATHS)
def test_each_path_matches_the_plain_loop_on_real_sized_curves(
    select: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
) -> None:
    rng = random.Random(16)
    group = [
        [(float(s), 1 / (1 + 0.01 * s) + 0.05 * rng.random()) for s in range(10_000)]
        for _ in range(3)
    ]
    # a loss plateau whose steps differ by less than float32 keeps apart: float64 throughout
    group.append([(float(s), 0.5 + 1e-9 * rng.random()) for s in range(10_000)])
    assert _selected(select, group, 2_000) == [lttb(c, 2_000) for c in group]


def _selected(
    select: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
    group: list[list[tuple[float, float]]],
    threshold: int,
) -> list[list[tuple[float, float]]]:
    """The points `select` keeps of curves of one length, given to it as rows."""
    xs = np.array([[x for x, _ in c] for c in group])
    ys = np.array([[y for _, y in c] for c in group])
    chosen = select(xs, ys, threshold)
    return [[c[i] for i in chosen[row]] for row, c in enumerate(group)]


@pytest.mark.parametrize(
    ("curves", "length", "loop"),
    [(1, 10_000, True), (8, 10_000, True), (12, 2_500, True), (2, 100_000, True),
     (12, 10_000, False), (100, 10_000, False), (3, 100_000, False), (20, 2_500, False)],
)  # fmt: skip
def test_a_few_curves_go_through_the_loop_and_many_through_numpy(
    curves: int, length: int, loop: bool
) -> None:
    assert lttb_many._loop_is_faster(curves, length, 2_000) is loop


def test_a_threshold_below_three_is_refused_as_by_the_plain_loop() -> None:
    with pytest.raises(ValueError, match="< 3"):
        lttb_arrays([(np.arange(10), np.zeros(10)), (np.arange(10), np.zeros(10))], 2)
    assert len(lttb_arrays([(np.arange(2), np.zeros(2))], 2)[0][0]) == 2  # nothing to drop
