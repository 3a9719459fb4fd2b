"""LTTB of many curves at once, with numpy: the fast path of `lttb.lttb` for a chart of
up to 100 runs.

LTTB's buckets depend only on a curve's length and the threshold, so curves of one length
share them: each bucket is then one vectorised step over all those curves (a row each)
instead of a Python loop over every point of every curve (100 curves of 10,000 steps took
3.3 s in `lttb`). The arithmetic is `lttb`'s, operation for operation, and the first
largest triangle wins as there; tests/tracking/test_lttb_many.py holds the two equal.

A vectorised step costs about 20 us a bucket whatever the rows, so a few curves are faster
through the plain loop (`_select_loop`): one curve of 10,000 steps cut to 2,000 points took
~40 ms in numpy and ~4 ms in the loop, the loop's time growing with the group's curves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forgeml.tracking.lttb import MAX_POINTS, lttb_indexes


def lttb_arrays(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], threshold: int = MAX_POINTS
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`[lttb(curve, threshold) for curve in curves]` of curves given as (xs, ys) arrays,
    each kept as (xs, ys) arrays, curves of one length computed together: the same points
    chosen, without a Python tuple a point (a chart's 100 curves of 10,000 steps are a
    million).

    Raises:
        ValueError: `threshold` below 3 while a curve has more points than it.
    """
    kept: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(curves)
    by_length: dict[int, list[int]] = {}
    for index, (xs, ys) in enumerate(curves):
        if len(xs) <= threshold:
            kept[index] = (xs, ys)
        else:
            by_length.setdefault(len(xs), []).append(index)
    if by_length and threshold < 3:
        raise ValueError(f"LTTB keeps the first and last points and one a bucket: {threshold} < 3.")
    for indexes in by_length.values():
        xs = np.stack([curves[i][0] for i in indexes]).astype(np.float64)
        ys = np.stack([curves[i][1] for i in indexes]).astype(np.float64)
        chosen = _select(xs, ys, threshold)
        for row, index in enumerate(indexes):
            kept[index] = (curves[index][0][chosen[row]], curves[index][1][chosen[row]])
    return [curve for curve in kept if curve is not None]


def _select(xs: np.ndarray, ys: np.ndarray, threshold: int) -> np.ndarray:
    """The kept indexes (curves, threshold) of curves with the rows of `xs`, `ys`, through
    whichever of numpy and the plain loop is faster for them."""
    count, length = xs.shape
    if _loop_is_faster(count, length, threshold):
        return _select_loop(xs, ys, threshold)
    return _select_numpy(xs, ys, threshold)


def _loop_is_faster(count: int, length: int, threshold: int) -> bool:
    """Whether the plain loop cuts `count` curves of `length` points to `threshold` faster
    than numpy does."""
    # medians on a loaded 2-core machine, the two run in turn: the loop spends ~1.7 us a
    # bucket and ~0.15 us a point on each curve, numpy ~20 us a bucket for all of them; cut
    # to 2,000 points, they met at 11 curves of 10,000 steps, 2 of 100,000, 15 of 2,500
    return count * (length + 10 * threshold) <= 150 * threshold


def _select_loop(xs: np.ndarray, ys: np.ndarray, threshold: int) -> np.ndarray:
    """`_select` by `lttb`'s plain loop, a curve at a time."""
    return np.array(
        [lttb_indexes(x.tolist(), y.tolist(), threshold) for x, y in zip(xs, ys, strict=True)],
        dtype=np.int64,
    ).reshape(len(xs), threshold)


def _select_numpy(xs: np.ndarray, ys: np.ndarray, threshold: int) -> np.ndarray:
    """`_select` vectorised over the curves, a bucket at a time."""
    count, length = xs.shape
    every = (length - 2) / (threshold - 2)
    chosen = np.zeros((count, threshold), dtype=np.int64)
    chosen[:, -1] = length - 1
    rows = np.arange(count)
    previous = np.zeros(count, dtype=np.int64)
    for bucket in range(threshold - 2):
        start = int(bucket * every) + 1
        end = int((bucket + 1) * every) + 1
        after_end = min(int((bucket + 2) * every) + 1, length)
        if end < after_end:
            # summed left to right as `lttb`'s sum() is (numpy's pairwise sum rounds otherwise)
            width = after_end - end
            avg_x = np.cumsum(xs[:, end:after_end], axis=1)[:, -1] / width
            avg_y = np.cumsum(ys[:, end:after_end], axis=1)[:, -1] / width
        else:
            avg_x, avg_y = xs[:, -1], ys[:, -1]
        ax, ay = xs[rows, previous], ys[rows, previous]
        x, y = xs[:, start:end], ys[:, start:end]
        area = np.abs(
            (ax - avg_x)[:, None] * (y - ay[:, None]) - (ax[:, None] - x) * (avg_y - ay)[:, None]
        )
        # a NaN triangle never wins in `lttb` (`area > best` is false); -1 loses to any area
        area = np.where(np.isnan(area), -1.0, area)
        previous = start + np.argmax(area, axis=1)
        chosen[:, bucket + 1] = previous
    return chosen
