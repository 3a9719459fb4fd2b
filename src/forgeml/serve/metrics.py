"""Prometheus metrics of one server, in a registry of its own (two apps in a process never mix).

| metric | type | labels |
|---|---|---|
| `forgeml_requests_total` | counter | model, protocol |
| `forgeml_request_errors_total` | counter | model, protocol, status |
| `forgeml_request_latency_seconds` | histogram | model, protocol |
| `forgeml_batch_size` | histogram (rows per forward pass) | model |
| `forgeml_inference_seconds` | histogram (one forward pass) | model |
| `forgeml_queue_depth` | gauge (requests waiting for a batch) | model |
| `forgeml_requests_in_flight` | gauge (inference requests received, not yet answered) | |
| `forgeml_latency_objective_seconds` | gauge (the p99 the model should meet) | model |
| `forgeml_gc_pause_seconds` | histogram (the collector stopping the process) | generation |
| `forgeml_gc_frozen_objects` | gauge (objects exempt from collection, `freeze_heap`) | |

A request for a model the server does not have is counted under model `_unknown`, so
callers cannot grow the label set without bound.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

UNKNOWN_MODEL = "_unknown"
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
_PAUSE_BUCKETS = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class ServerMetrics:
    """The metrics of one model server."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "forgeml_requests", "Requests received.", ["model", "protocol"], registry=self.registry
        )
        self.errors = Counter(
            "forgeml_request_errors",
            "Requests answered with an error status.",
            ["model", "protocol", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "forgeml_request_latency_seconds",
            "Time from request received to response ready.",
            ["model", "protocol"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "forgeml_batch_size",
            "Rows per forward pass.",
            ["model"],
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.inference = Histogram(
            "forgeml_inference_seconds",
            "Time of one batch: encoding, forward pass and decoding.",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "forgeml_queue_depth",
            "Requests waiting for a batch.",
            ["model"],
            registry=self.registry,
        )
        # unlabelled: the model is known only once routed; the autoscaler reads this one
        self.in_flight = Gauge(
            "forgeml_requests_in_flight",
            "Inference requests received and not yet answered.",
            registry=self.registry,
        )
        self.objective = Gauge(
            "forgeml_latency_objective_seconds",
            "The p99 request latency the model should meet (the alert rule's threshold).",
            ["model"],
            registry=self.registry,
        )

        self.gc_pause = Histogram(
            "forgeml_gc_pause_seconds",
            "Time one garbage collection held the interpreter (every thread waits).",
            ["generation"],
            buckets=_PAUSE_BUCKETS,
            registry=self.registry,
        )
        self._gc_started = 0.0
        Gauge(
            "forgeml_gc_frozen_objects",
            "Objects exempt from garbage collection (gc.freeze after loading).",
            registry=self.registry,
        ).set_function(gc.get_freeze_count)

    def watch_gc(self) -> None:
        """Time every garbage collection of this process until `unwatch_gc`."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def unwatch_gc(self) -> None:
        """Stop timing garbage collections."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            pause = time.perf_counter() - self._gc_started
            self.gc_pause.labels(str(info["generation"])).observe(pause)

    def track_queue(self, model: str, depth: Callable[[], int]) -> None:
        """Report `depth()` as the queue depth of `model` at every scrape."""
        self.queue_depth.labels(model).set_function(depth)

    def set_objective(self, model: str, seconds: float) -> None:
        """The p99 latency `model` should meet."""
        self.objective.labels(model).set(seconds)

    def observe_batch(self, model: str, rows: int, seconds: float) -> None:
        """Record one forward pass of `rows` rows that took `seconds`."""
        self.batch_size.labels(model).observe(rows)
        self.inference.labels(model).observe(seconds)

    def observe_request(self, model: str, protocol: str, status: int, seconds: float) -> None:
        """Record one answered request."""
        self.requests.labels(model, protocol).inc()
        self.latency.labels(model, protocol).observe(seconds)
        if status >= 400:
            self.errors.labels(model, protocol, str(status)).inc()

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
