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
| `gen_ai_server_time_to_first_token_seconds` | histogram (request start to first token) | model |
| `gen_ai_server_time_per_output_token_seconds` | histogram (after the first token) | model |
| `gen_ai_client_token_usage` | histogram (tokens per generation) | model, gen_ai_token_type |

The `gen_ai_*` metrics are OpenTelemetry's GenAI semantic conventions
(https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/) in Prometheus form:
`gen_ai.server.time_to_first_token` (s), `gen_ai.server.time_per_output_token` (s) and
`gen_ai.client.token.usage` with `gen_ai.token.type` input or output.

A request for a model the server does not have is counted under model `_unknown`, so
callers cannot grow the label set without bound.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from forgeml.serve.tokens import GenerationStream

UNKNOWN_MODEL = "_unknown"
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
_PAUSE_BUCKETS = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# OpenTelemetry's advised buckets for these GenAI metrics
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
_TTFT_BUCKETS_LONG = (*_TTFT_BUCKETS, 2.5, 5.0, 7.5, 10.0)
_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_TOKEN_BUCKETS = tuple(float(4**power) for power in range(14))  # 1 .. 67,108,864


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
        self._gen_ai_metrics()

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

    def _gen_ai_metrics(self) -> None:
        self.time_to_first_token = Histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "Time from a generation request to its first output token.",
            ["model"],
            buckets=_TTFT_BUCKETS_LONG,
            registry=self.registry,
        )
        self.time_per_output_token = Histogram(
            "gen_ai_server_time_per_output_token_seconds",
            "Time per output token after the first, per generation.",
            ["model"],
            buckets=_TPOT_BUCKETS,
            registry=self.registry,
        )
        self.token_usage = Histogram(
            "gen_ai_client_token_usage",
            "Input (prompt) and output (completion) tokens per generation.",
            ["model", "gen_ai_token_type"],
            buckets=_TOKEN_BUCKETS,
            registry=self.registry,
        )

    def observe_generation(self, model: str, stream: GenerationStream) -> None:
        """Record one ended generation of `model`: its first-token and per-token times, tokens."""
        if stream.first_token is not None:
            self.time_to_first_token.labels(model).observe(stream.first_token - stream.started)
            if stream.finished is not None and stream.completion_tokens > 1:
                per_token = (stream.finished - stream.first_token) / (stream.completion_tokens - 1)
                self.time_per_output_token.labels(model).observe(per_token)
        self.token_usage.labels(model, "input").observe(stream.prompt_tokens)
        self.token_usage.labels(model, "output").observe(stream.completion_tokens)

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
