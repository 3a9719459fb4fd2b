"""The curves a page charts: each run's metrics logged at more than one step, LTTB-downsampled
to the chart's points, and kept while their runs log nothing new.

Reading a curve is its cost (10,000 rows a run from MLflow's table; 100 runs compared read
a million), and a downsampled curve is small (`points` pairs), so the app keeps the last
`CurveCache.max_points` points it made. A kept curve is used only while its run still has
the count of values it was made from: rows are only ever added, so a run that logs again
is read again. A tracking server keeps no count, so its curves are read every time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from forgeml.tracking.history import metric_histories, metric_point_counts
from forgeml.ui._lttb_many import lttb_many

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

# a curve as the page's JSON carries it: [steps], [values]
Series = tuple[list[int], list[float]]


class CurveCache:
    """Downsampled curves by (run, metric, values logged, points), least recently used
    dropped first once they hold more than `max_points` points; safe across threads."""

    def __init__(self, max_points: int = 500_000) -> None:
        self.max_points = max_points
        self._kept: OrderedDict[tuple[str, str, int, int], Series] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int, int]) -> Series | None:
        """The curve kept under `key`, or None."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, int, int], series: Series) -> None:
        """Keep `series` under `key`, dropping the least recently used beyond the bound."""
        with self._lock:
            if key in self._kept:
                return
            self._kept[key] = series
            self._held += len(series[0])
            while self._held > self.max_points and len(self._kept) > 1:
                _, dropped = self._kept.popitem(last=False)
                self._held -= len(dropped[0])


def run_curves(
    workspace: Workspace, run_ids: list[str], points: int, cache: CurveCache
) -> dict[str, dict[str, Series]]:
    """{run_id: {metric: (steps, values)}} of the runs' metrics logged at more than one
    step (a single value is no curve: the metrics table shows it), at most `points` each."""
    counts = metric_point_counts(workspace, run_ids)
    found: dict[str, dict[str, Series]] = {run_id: {} for run_id in run_ids}
    missing: list[str] = []
    for run_id in run_ids:
        if counts is None:
            missing.append(run_id)
            continue
        for key, count in sorted(counts[run_id].items()):
            kept = cache.get((run_id, key, count, points)) if count > 1 else None
            if kept is not None:
                found[run_id][key] = kept
            elif count > 1 and run_id not in missing:
                missing.append(run_id)
    if missing:
        _read(workspace, missing, points, cache, found)
    # every run's metrics in key order, whichever came from the cache
    return {run_id: dict(sorted(curves.items())) for run_id, curves in found.items()}


def _read(
    workspace: Workspace,
    run_ids: list[str],
    points: int,
    cache: CurveCache,
    found: dict[str, dict[str, Series]],
) -> None:
    read = metric_histories(workspace, run_ids)
    todo = [
        (run_id, key, curve)
        for run_id in run_ids
        for key, curve in read[run_id].items()
        if len(curve) > 1 and key not in found[run_id]
    ]
    downsampled = lttb_many([[(float(s), v) for s, v in curve] for _, _, curve in todo], points)
    for (run_id, key, curve), kept in zip(todo, downsampled, strict=True):
        series: Series = ([int(x) for x, _ in kept], [y for _, y in kept])
        found[run_id][key] = series
        cache.put((run_id, key, len(curve), points), series)
