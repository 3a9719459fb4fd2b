"""Largest-Triangle-Three-Buckets downsampling of a metric curve (Steinarsson, "Downsampling
Time Series for Visual Representation", University of Iceland, 2013, section 4.2).

A chart never needs more points than it has pixels: a curve of 100k steps is cut to at most
`MAX_POINTS` on the server, keeping its first and last points and, in each bucket between,
the point that spans the largest triangle with its neighbours' (so spikes survive, where
taking every n-th point drops them).
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_POINTS = 2000


def lttb(
    points: Sequence[tuple[float, float]], threshold: int = MAX_POINTS
) -> list[tuple[float, float]]:
    """At most `threshold` of `points` (sorted by x), chosen by LTTB; all of them when they
    are no more than `threshold`.

    Raises:
        ValueError: `threshold` below 3 while there are more points than it.
    """
    if len(points) <= threshold:
        return list(points)
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    return [points[index] for index in lttb_indexes(xs, ys, threshold)]


def lttb_indexes(xs: Sequence[float], ys: Sequence[float], threshold: int) -> list[int]:
    """The indexes of the points `lttb` keeps of the curve (`xs[i]`, `ys[i]`), in order.

    Raises:
        ValueError: `threshold` below 3 while there are more points than it.
    """
    count = len(xs)
    if count <= threshold:
        return list(range(count))
    if threshold < 3:
        raise ValueError(f"LTTB keeps the first and last points and one a bucket: {threshold} < 3.")
    kept = [0]
    every = (count - 2) / (threshold - 2)  # the buckets between the first and last points
    chosen = 0
    for bucket in range(threshold - 2):
        start = int(bucket * every) + 1
        end = int((bucket + 1) * every) + 1
        # the next bucket's average point (the last point for the final bucket)
        after_end = min(int((bucket + 2) * every) + 1, count)
        if end < after_end:
            avg_x = sum(xs[end:after_end]) / (after_end - end)
            avg_y = sum(ys[end:after_end]) / (after_end - end)
        else:
            avg_x, avg_y = xs[-1], ys[-1]
        ax, ay = xs[chosen], ys[chosen]
        best, best_area = start, -1.0
        for index in range(start, end):
            area = abs((ax - avg_x) * (ys[index] - ay) - (ax - xs[index]) * (avg_y - ay))
            if area > best_area:
                best, best_area = index, area
        kept.append(best)
        chosen = best
    kept.append(count - 1)
    return kept
