"""Forwarding to replicas: pooled connections, timeouts, one retry elsewhere, breakers, shadows.

A connect failure or a 502/503 from a replica is safe to retry (the request did not run, or
the replica said it could not), so it is retried once on a *different* replica; a timeout
is not (the model may still be running it) and becomes a 504.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from forgeml.core.errors import (
    BadGatewayError,
    ForgemlError,
    ServiceUnavailableError,
    UpstreamTimeoutError,
)
from forgeml.gateway._breaker import CircuitBreaker
from forgeml.gateway._options import GatewayOptions

# hop-by-hop headers (RFC 9110 §7.6.1) and the caller's credentials never reach a replica
_DROP_REQUEST = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
     "upgrade", "proxy-authorization", "proxy-connection", "authorization", "x-api-key"}
)  # fmt: skip
_DROP_RESPONSE = frozenset(
    {"content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
     "upgrade", "date", "server"}
)  # fmt: skip
_RETRYABLE_STATUS = frozenset({502, 503})


@dataclass(frozen=True)
class Outgoing:
    """A request to send to some replica: `target` is the path plus query string."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class Forwarded:
    """A replica's answer: a complete body, or an open stream (server-sent events)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    stream: httpx.Response | None
    replica: str


def request_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The caller's headers a replica may see."""
    return [(name, value) for name, value in headers if name.lower() not in _DROP_REQUEST]


class Upstreams:
    """The connection pool and circuit breakers of every replica the gateway talks to."""

    def __init__(
        self, options: GatewayOptions, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._options = options
        self._clock = clock
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(options.request_timeout_s, connect=options.connect_timeout_s),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=128),
        )
        self.breakers: dict[str, CircuitBreaker] = {}
        self._shadows: set[asyncio.Task[None]] = set()

    def breaker(self, replica: str) -> CircuitBreaker:
        """The breaker of `replica`, made on first use."""
        found = self.breakers.get(replica)
        if found is None:
            options = self._options
            found = CircuitBreaker(options.breaker_failures, options.breaker_cooldown_s)
            self.breakers[replica] = found
        return found

    async def forward(self, deployment: str, candidates: list[str], request: Outgoing) -> Forwarded:
        """Send `request` (URL relative to a replica) to the first replica that takes it.

        Raises:
            ServiceUnavailableError: no replica is healthy, or every one tried failed.
            UpstreamTimeoutError: the replica tried did not answer in time.
            BadGatewayError: the replica broke the connection mid-answer.
        """
        attempts = 0
        last: Forwarded | None = None
        for replica in candidates:
            if attempts > self._options.retries:
                break
            breaker = self.breaker(replica)
            if not breaker.allow(self._clock()):
                continue
            attempts += 1
            answer = await self._try(replica, breaker, request)
            if answer is None:
                continue
            if answer.status not in _RETRYABLE_STATUS:
                breaker.success()
                return answer
            breaker.failure(self._clock())
            last = answer
        if last is not None:
            return last
        if attempts == 0:
            raise ServiceUnavailableError(f"Deployment {deployment!r} has no healthy replica.")
        raise ServiceUnavailableError(
            f"Every replica of deployment {deployment!r} tried ({attempts}) failed to connect."
        )

    async def _try(
        self, replica: str, breaker: CircuitBreaker, request: Outgoing
    ) -> Forwarded | None:
        """One attempt: the answer, or None when the replica could not be reached."""
        sent = self._build(replica, request)
        try:
            response = await self._client.send(sent, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            breaker.failure(self._clock())
            return None
        except httpx.TransportError as error:
            raise self._failed(replica, breaker, error) from error
        headers = [(k, v) for k, v in response.headers.items() if k not in _DROP_RESPONSE]
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return Forwarded(response.status_code, headers, b"", response, replica)
        try:
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        except httpx.TransportError as error:
            raise self._failed(replica, breaker, error) from error
        finally:
            await response.aclose()
        return Forwarded(response.status_code, headers, body, None, replica)

    def _failed(
        self, replica: str, breaker: CircuitBreaker, error: httpx.TransportError
    ) -> ForgemlError:
        """Count a failure once the request was sent: the error to answer with (504 or 502)."""
        breaker.failure(self._clock())
        if isinstance(error, httpx.TimeoutException):
            return UpstreamTimeoutError(f"Replica {replica} did not answer in time.")
        return BadGatewayError(f"Replica {replica} broke the connection: {error}.")

    def shadow(self, replica: str, request: Outgoing) -> None:
        """Send a copy to `replica` in the background; its answer and failure are ignored."""
        if len(self._shadows) >= self._options.max_shadow_in_flight:
            return  # shed shadow load rather than queue it behind real traffic
        task = asyncio.create_task(self._send_shadow(replica, request))
        self._shadows.add(task)
        task.add_done_callback(self._shadows.discard)

    async def _send_shadow(self, replica: str, request: Outgoing) -> None:
        try:
            response = await self._client.send(self._build(replica, request))
            await response.aclose()
        except httpx.HTTPError:
            pass  # a shadow's failure is its own business, never the caller's

    def _build(self, replica: str, request: Outgoing) -> httpx.Request:
        return self._client.build_request(
            request.method, replica + request.target, headers=request.headers,
            content=request.body,
        )  # fmt: skip

    async def close(self) -> None:
        """Wait briefly for shadow copies, then close every connection."""
        if self._shadows:
            await asyncio.wait(set(self._shadows), timeout=self._options.connect_timeout_s)
        await self._client.aclose()
