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
    count = len(points)
    if count <= threshold:
        return list(points)
    if threshold < 3:
        raise ValueError(f"LTTB keeps the first and last points and one a bucket: {threshold} < 3.")
    kept = [points[0]]
    every = (count - 2) / (threshold - 2)  # the buckets between the first and last points
    chosen = 0
    for bucket in range(threshold - 2):
        start = int(bucket * every) + 1
        end = int((bucket + 1) * every) + 1
        # the next bucket's average point (the last point for the final bucket)
        after_end = min(int((bucket + 2) * every) + 1, count)
        following = points[end:after_end] or [points[-1]]
        avg_x = sum(x for x, _ in following) / len(following)
        avg_y = sum(y for _, y in following) / len(following)
        ax, ay = points[chosen]
        best, best_area = start, -1.0
        for index in range(start, end):
            x, y = points[index]
            area = abs((ax - avg_x) * (y - ay) - (ax - x) * (avg_y - ay))
            if area > best_area:
                best, best_area = index, area
        kept.append(points[best])
        chosen = best
    kept.append(points[-1])
    return kept
