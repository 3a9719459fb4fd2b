"""The gateway's metrics count each series however many series there are."""

from __future__ import annotations

import time

from forgeml.gateway._responses import _MAX_CACHED_SERIES, GatewayMetrics


def _count(metrics: GatewayMetrics, prefix: str) -> float | None:
    labels = {"deployment": "dep", "key_prefix": prefix, "code": "200"}
    return metrics.registry.get_sample_value("forgeml_gateway_requests_total", labels)


def test_every_request_is_counted_past_the_cached_series() -> None:
    metrics = GatewayMetrics()
    prefixes = [f"k{i}" for i in range(_MAX_CACHED_SERIES + 10)]
    for prefix in prefixes:
        metrics.observe("dep", prefix, 200, time.perf_counter())
    metrics.observe("dep", "k0", 200, time.perf_counter())  # its cached series was dropped
    metrics.observe("dep", prefixes[-1], 200, time.perf_counter())  # still cached
    assert _count(metrics, "k0") == 2
    assert _count(metrics, prefixes[-1]) == 2
    assert _count(metrics, "k5") == 1
    latency = metrics.registry.get_sample_value(
        "forgeml_gateway_request_duration_seconds_count", {"deployment": "dep"}
    )
    assert latency == len(prefixes) + 2


def test_status_codes_are_separate_series() -> None:
    metrics = GatewayMetrics()
    metrics.observe("dep", "abc", 200, time.perf_counter())
    metrics.observe("dep", "abc", 503, time.perf_counter())
    labels = {"deployment": "dep", "key_prefix": "abc"}
    for code in ("200", "503"):
        value = metrics.registry.get_sample_value(
            "forgeml_gateway_requests_total", {**labels, "code": code}
        )
        assert value == 1
