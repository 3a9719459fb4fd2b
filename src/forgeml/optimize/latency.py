"""In-process latency of one forward pass: median and tail over repeated timed calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class LatencyStats:
    """Milliseconds per call at one batch size."""

    batch_size: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    calls: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between ranks (numpy's default)."""
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def measure(
    call: Callable[[], object], batch_size: int, repeats: int, warmup: int = 2
) -> LatencyStats:
    """Time `call` `repeats` times after `warmup` untimed calls (first calls allocate).

    Args:
        call: one forward pass over a prepared batch.
        batch_size: rows in that batch (recorded with the figures).
        repeats: timed calls, at least 1.
        warmup: untimed calls first.
    """
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return LatencyStats(
        batch_size=batch_size,
        p50_ms=percentile(samples, 50),
        p99_ms=percentile(samples, 99),
        mean_ms=statistics.fmean(samples),
        calls=len(samples),
    )
