from __future__ import annotations

import numpy as np
import pytest

from forgeml.optimize.latency import measure, percentile


@pytest.mark.parametrize("q", [0, 50, 90, 99, 100])
def test_percentile_matches_numpy(q: float) -> None:
    samples = [3.0, 1.0, 7.5, 2.0, 9.0, 4.0]
    assert percentile(samples, q) == pytest.approx(float(np.percentile(samples, q)))


def test_measure_warms_up_then_times_each_call() -> None:
    calls: list[int] = []
    stats = measure(lambda: calls.append(1), batch_size=8, repeats=5, warmup=2)
    assert len(calls) == 7
    assert (stats.batch_size, stats.calls) == (8, 5)
    assert 0 <= stats.p50_ms <= stats.p99_ms
