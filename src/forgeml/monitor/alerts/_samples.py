"""A bounded in-memory store of recent samples: what the embedded rule evaluation reads.

Series are keyed by their full label set (`__name__` included). Each keeps its samples for
`retention` seconds (the longest range a rule reads plus Prometheus' 5-minute lookback);
older ones are dropped as new ones arrive, so memory is bounded by series x scrapes per
retention window. A series a source exported before and no longer does gets a staleness
marker, as Prometheus writes one (prometheus.io/docs/prometheus/latest/querying/basics/
#staleness): an instant selector stops seeing it at once instead of 5 minutes later.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping

Labels = tuple[tuple[str, str], ...]
"""A series' labels, sorted by name: hashable, and the series' identity."""

STALE = float("nan")
"""The staleness marker. Stored apart from real NaN samples (see `SampleStore.add`)."""

DEFAULT_RETENTION_S = 35 * 60.0


def _time(point: tuple[float, float, bool]) -> float:
    return point[0]


def labels_of(mapping: Mapping[str, str]) -> Labels:
    """`mapping` as a `Labels` tuple (empty values dropped, as in Prometheus)."""
    return tuple(sorted((k, v) for k, v in mapping.items() if v != ""))


class SampleStore:
    """Recent samples of every series, thread-safe (a writer per cycle, readers per rule)."""

    def __init__(self, retention: float = DEFAULT_RETENTION_S) -> None:
        self.retention = retention
        # per series: (timestamp, value, is a staleness marker), in time order
        self._series: dict[Labels, list[tuple[float, float, bool]]] = {}
        self._by_name: dict[str, set[Labels]] = {}
        self._by_source: dict[str, set[Labels]] = {}
        self._lock = threading.Lock()

    def add(self, labels: Labels, timestamp: float, value: float) -> None:
        """Append one sample; samples of a series must come in time order."""
        with self._lock:
            self._append(labels, timestamp, value, stale=False)

    def ingest(self, source: str, samples: Iterable[tuple[Labels, float]], timestamp: float) -> int:
        """One scrape of `source` at `timestamp`: its samples, and staleness markers for the
        series it exported last time and not now. Returns the number of samples added."""
        seen: set[Labels] = set()
        with self._lock:
            for labels, value in samples:
                if labels in seen:
                    continue  # a duplicate series in one exposition: Prometheus keeps the first
                seen.add(labels)
                self._append(labels, timestamp, value, stale=False)
            for gone in self._by_source.get(source, set()) - seen:
                self._append(gone, timestamp, STALE, stale=True)
            self._by_source[source] = seen
            self._expire(timestamp)
        return len(seen)

    def mark_stale(self, source: str, timestamp: float) -> None:
        """A source that could not be scraped: its series go stale, as Prometheus does."""
        self.ingest(source, (), timestamp)

    def _append(self, labels: Labels, timestamp: float, value: float, *, stale: bool) -> None:
        points = self._series.get(labels)
        if points is None:
            points = self._series[labels] = []
            self._by_name.setdefault(dict(labels).get("__name__", ""), set()).add(labels)
        if points and points[-1][0] >= timestamp:
            return  # out of order or a repeat: Prometheus rejects it too
        points.append((timestamp, value, stale))

    def _expire(self, now: float) -> None:
        horizon = now - self.retention
        for labels in list(self._series):
            points = self._series[labels]
            if points[0][0] >= horizon:
                continue
            del points[: bisect_left(points, horizon, key=_time)]
            if not points:
                del self._series[labels]
                self._by_name[dict(labels).get("__name__", "")].discard(labels)

    def series(self, name: str | None) -> list[Labels]:
        """The label sets of every series named `name` (every series when None)."""
        with self._lock:
            if name is None:
                return list(self._series)
            return list(self._by_name.get(name, ()))

    def instant(self, labels: Labels, at: float, lookback: float) -> float | None:
        """The latest sample of `labels` in [at - lookback, at], None if there is none or
        it is a staleness marker."""
        with self._lock:
            points = self._series.get(labels, ())
            for timestamp, value, stale in reversed(points):
                if timestamp > at:
                    continue
                if timestamp < at - lookback or stale:
                    return None
                return value
        return None

    def window(self, labels: Labels, start: float, end: float) -> list[tuple[float, float]]:
        """The samples of `labels` in [start, end] (Prometheus 2.x' closed range), markers
        left out."""
        with self._lock:
            points = self._series.get(labels, [])
            low = bisect_left(points, start, key=_time)
            high = bisect_right(points, end, key=_time)
            return [(timestamp, value) for timestamp, value, stale in points[low:high] if not stale]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(points) for points in self._series.values())
