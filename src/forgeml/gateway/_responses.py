"""Error bodies in each protocol's own shape, and the gateway's Prometheus metrics."""

from __future__ import annotations

import re
import time
from typing import Any

from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter, Histogram

from forgeml.core.errors import ColdStartTimeoutError, ForgemlError, RateLimitedError
from forgeml.gateway._limits import retry_after_header

# the OpenAI routes whose body's `model` names the deployment, and all of OpenAI's routes
MODEL_IN_BODY_PATHS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/embeddings"})
OPENAI_PATHS = MODEL_IN_BODY_PATHS | {"/v1/models"}
# forgeml's RAG routes (`forgeml serve --rag`): the body's `model` names the deployment too
RAG_PATH = re.compile(r"/v1/rag/[^/]+/(?:query|answer)")
# series whose metric children are kept at hand (bounded: key prefixes come from callers)
_MAX_CACHED_SERIES = 4096
# the key_prefix label of requests refused for want of a valid key (real prefixes are hex)
UNAUTHENTICATED = "unauthenticated"
_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
}


def model_in_body_path(path: str) -> bool:
    """Whether a POST to `path` names its deployment in the body's `model`."""
    return path in MODEL_IN_BODY_PATHS or RAG_PATH.fullmatch(path) is not None


def error_response(path: str, error: ForgemlError) -> JSONResponse:
    """`error` as JSON: OpenAI's `{"error": {...}}` on OpenAI routes, else `{"error": "..."}`."""
    status = error.http_status
    message = str(error)
    if path in OPENAI_PATHS:
        kind = _OPENAI_TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        body: dict[str, object] = {
            "error": {"message": message, "type": kind, "param": None, "code": str(status)}
        }
    else:
        body = {"error": message}
    headers = None
    if isinstance(error, (RateLimitedError, ColdStartTimeoutError)):
        headers = {"Retry-After": retry_after_header(error.retry_after)}
    return JSONResponse(body, status_code=status, headers=headers)


class GatewayMetrics:
    """Requests and latency per deployment and key prefix, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "forgeml_gateway_requests",
            "Requests the gateway answered, by deployment, key prefix and status code "
            f"(key_prefix {UNAUTHENTICATED}: refused for a missing, unknown or revoked key).",
            ["deployment", "key_prefix", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "forgeml_gateway_request_duration_seconds",
            "Time from request to response head at the gateway, by deployment.",
            ["deployment"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
        )
        self.cold_start = Histogram(
            "forgeml_gateway_cold_start_seconds",
            "Time a request waited for a deployment scaled to zero to get a ready replica.",
            ["deployment"],
            registry=self.registry,
            buckets=(0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120),
        )
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, deployment: str, key_prefix: str, code: int, started: float) -> None:
        """Count one answered request that began at `started` (a perf_counter reading)."""
        elapsed = time.perf_counter() - started
        children = self._children.get((deployment, key_prefix, code))
        if children is None:  # `labels()` validates and locks on every call: once per series
            children = (
                self.requests.labels(deployment, key_prefix, str(code)),
                self.latency.labels(deployment),
            )
            if len(self._children) >= _MAX_CACHED_SERIES:
                self._children.clear()
            self._children[(deployment, key_prefix, code)] = children
        children[0].inc()
        children[1].observe(elapsed)
