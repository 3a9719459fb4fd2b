"""The curves a page charts: each run's metrics logged at more than one step, LTTB-downsampled
to the chart's points, and kept for runs that have ended while nothing new is logged.

Reading a curve is its cost (10,000 rows a run from MLflow's table; 100 runs compared read
a million), and a downsampled curve is small (`points` pairs), so the app keeps the last
`CurveCache.max_points` points it made, for runs no longer RUNNING. A kept curve is used
while MLflow's latest value of its metric is the one it was made with: a value logged past
it (a later step) makes the curve read again. A value logged behind it (an earlier step,
into a run that has ended) is not seen until the cache drops the curve. A tracking server
keeps no latest values here, so its curves are read every time.

A curve the cache lacks is taken, for an ended run, from the preview forgeml stored as it
ended the run (`tracking.previews`), all the runs' previews in one query, under the same
rule (used while MLflow's latest value is the preview's); a chart of fewer points than the
preview downsamples it again. Running runs, runs ended outside forgeml or before previews
existed, and stale previews are read from MLflow.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from forgeml.tracking.history import latest_metrics, metric_arrays
from forgeml.tracking.lttb_many import lttb_arrays
from forgeml.tracking.previews import latest_of, read_curve_previews

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

# a curve as the page's JSON carries it: [steps], [values]
Series = tuple[list[int], list[float]]
# (run, metric, its latest value as MLflow keeps it, points)
Key = tuple[str, str, tuple[Any, ...], int]


class CurveCache:
    """Downsampled curves by (run, metric, its latest value, points), least recently used
    dropped first once they hold more than `max_points` points; safe across threads."""

    def __init__(self, max_points: int = 500_000) -> None:
        self.max_points = max_points
        self._kept: OrderedDict[Key, Series] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: Key) -> Series | None:
        """The curve kept under `key`, or None."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def put(self, key: Key, series: Series) -> None:
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
    workspace: Workspace,
    run_ids: list[str],
    points: int,
    cache: CurveCache,
    ended: set[str] | frozenset[str] = frozenset(),
) -> dict[str, dict[str, Series]]:
    """{run_id: {metric: (steps, values)}} of the runs' metrics logged at more than one
    step (a single value is no curve: the metrics table shows it), at most `points` each;
    the curves of `ended` runs (no longer RUNNING) are kept in `cache` and taken from it,
    or from their stored previews."""
    latest = latest_metrics(workspace, [run_id for run_id in run_ids if run_id in ended])
    found: dict[str, dict[str, Series]] = {run_id: {} for run_id in run_ids}
    missing: list[str] = []
    for run_id in run_ids:
        keys = (latest or {}).get(run_id)
        kept = [cache.get((run_id, key, last, points)) for key, last in (keys or {}).items()]
        if keys and all(series is not None for series in kept):
            found[run_id] = dict(zip(keys, kept, strict=True))  # type: ignore[arg-type]
        else:
            missing.append(run_id)
    missing = _from_previews(workspace, missing, points, cache, found, latest or {})
    if missing:
        _read(workspace, missing, points, cache, found, latest or {})
    # a single value is no curve; every run's metrics in key order
    return {
        run_id: {key: series for key, series in sorted(curves.items()) if len(series[0]) > 1}
        for run_id, curves in found.items()
    }


def _read(
    workspace: Workspace,
    run_ids: list[str],
    points: int,
    cache: CurveCache,
    found: dict[str, dict[str, Series]],
    latest: dict[str, dict[str, tuple[Any, ...]]],
) -> None:
    read = metric_arrays(workspace, run_ids)
    todo = [(run_id, key, curve) for run_id in run_ids for key, curve in read[run_id].items()]
    downsampled = lttb_arrays([curve for _, _, curve in todo], points)
    for (run_id, key, _), (steps, values) in zip(todo, downsampled, strict=True):
        series: Series = (steps.tolist(), values.tolist())
        found[run_id][key] = series
        last = latest.get(run_id, {}).get(key)
        if last is not None:  # read after `latest`: at least as new as it
            cache.put((run_id, key, last, points), series)


def _from_previews(
    workspace: Workspace,
    run_ids: list[str],
    points: int,
    cache: CurveCache,
    found: dict[str, dict[str, Series]],
    latest: dict[str, dict[str, tuple[Any, ...]]],
) -> list[str]:
    """Fill `found` with the curves of the ended runs among `run_ids` whose every metric has
    a preview made at MLflow's latest value of it; the runs still to read from MLflow."""
    ended = [run_id for run_id in run_ids if latest.get(run_id)]
    stored = read_curve_previews(workspace, ended) if ended else {}
    todo: list[tuple[str, str, tuple[Any, ...], Any]] = []
    missing = []
    for run_id in run_ids:
        keys, previews = latest.get(run_id) or {}, stored.get(run_id, {})
        usable = [
            (run_id, key, last, previews[key])
            for key, last in keys.items()
            if key in previews
            and previews[key].latest == latest_of(last)
            and previews[key].serves(points)
        ]
        if keys and len(usable) == len(keys):
            todo += usable
        else:
            missing.append(run_id)
    curves = [(preview.steps, preview.values) for *_, preview in todo]
    for (run_id, key, last, _), (steps, values) in zip(
        todo, lttb_arrays(curves, points), strict=True
    ):
        series: Series = (steps.tolist(), values.tolist())
        found[run_id][key] = series
        cache.put((run_id, key, last, points), series)
    return missing
