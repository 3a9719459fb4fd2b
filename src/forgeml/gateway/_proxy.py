"""Forwarding to replicas: pooled connections, timeouts, one retry elsewhere, breakers, shadows.

A connect failure or a 502/503 from a replica is safe to retry (the request did not run, or
the replica said it could not), so it is retried once on a *different* replica; a timeout
is not (the model may still be running it) and becomes a 504. Server-sent events are relayed
chunk by chunk as they arrive; every other answer is read whole.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property

from forgeml.core.errors import (
    BadGatewayError,
    ForgemlError,
    ServiceUnavailableError,
    UpstreamTimeoutError,
)
from forgeml.gateway._breaker import CircuitBreaker
from forgeml.gateway._options import GatewayOptions
from forgeml.gateway._upstream import Answer, BrokenAnswerError, NotConnectedError, Pool

# hop-by-hop headers (RFC 9110 §7.6.1) and the caller's credentials never reach a replica;
# nor does Expect: the gateway has the whole body before it forwards (§10.1.1 lets it answer)
_DROP_REQUEST = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
     "upgrade", "proxy-authorization", "proxy-connection", "authorization", "x-api-key",
     "expect"}
)  # fmt: skip
_DROP_RESPONSE = frozenset(
    {"content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
     "upgrade", "date", "server"}
)  # fmt: skip
_RETRYABLE_STATUS = frozenset({502, 503})
# uvicorn (the replicas' server) drops an idle connection after 5 s: let go of it first, so a
# request does not go out on a connection the replica is closing (a POST is never resent)
_KEEPALIVE_S = 4.0
_MAX_CONNECTIONS = 512


@dataclass(frozen=True)
class Outgoing:
    """A request to send to some replica: `target` is the path plus query string."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    @cached_property
    def head(self) -> bytes:
        """The request line and headers, less Host and Content-Length (the pool adds them)."""
        lines = [f"{self.method} {self.target} HTTP/1.1\r\n"]
        lines += [f"{name}: {value}\r\n" for name, value in self.headers]
        return "".join(lines).encode("latin-1")


@dataclass(frozen=True)
class Stream:
    """An answer still arriving: iterate `chunks`, then always await `close()`."""

    chunks: AsyncIterator[bytes]
    close: Callable[[], Awaitable[None]]


@dataclass
class Forwarded:
    """A replica's answer: a complete body, or an open stream (server-sent events)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    stream: Stream | None
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
        self._pool: Pool | None = None
        self.breakers: dict[str, CircuitBreaker] = {}
        self._shadows: set[asyncio.Task[None]] = set()

    def _connections(self) -> Pool:
        """The shared pool, made on first use (inside the event loop that will use it)."""
        if self._pool is None:
            self._pool = Pool(_MAX_CONNECTIONS, self._options.connect_timeout_s, _KEEPALIVE_S)
        return self._pool

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
        try:
            answer = await self._send(replica, request)
        except NotConnectedError:
            breaker.failure(self._clock())
            return None
        except (BrokenAnswerError, TimeoutError) as error:
            raise self._failed(replica, breaker, error) from error
        headers = [(k, v) for k, v in answer.headers if k.lower() not in _DROP_RESPONSE]
        if answer.streamed:
            stream = Stream(answer.chunks(), answer.close)
            return Forwarded(answer.status, headers, b"", stream, replica)
        try:
            content = await answer.read()
        except (BrokenAnswerError, TimeoutError) as error:
            raise self._failed(replica, breaker, error) from error
        return Forwarded(answer.status, headers, content, None, replica)

    def _failed(self, replica: str, breaker: CircuitBreaker, error: Exception) -> ForgemlError:
        """Count a failure once the request was sent: the error to answer with (504 or 502)."""
        breaker.failure(self._clock())
        if isinstance(error, TimeoutError):
            return UpstreamTimeoutError(f"Replica {replica} did not answer in time.")
        return BadGatewayError(f"Replica {replica} broke the connection: {error}.")

    def shadow(self, replica: str, request: Outgoing) -> None:
        """Send a copy to `replica` in the background; its answer and failure are ignored."""
        if len(self._shadows) >= self._options.max_shadow_in_flight:
            return  # shed shadow load rather than queue it behind real traffic
        task = asyncio.create_task(self._send_shadow(replica, request))
        self._shadows.add(task)
        task.add_done_callback(self._shadows.discard)

    @property
    def shadows_in_flight(self) -> int:
        """How many shadow copies are still being sent or read."""
        return len(self._shadows)

    async def _send_shadow(self, replica: str, request: Outgoing) -> None:
        try:
            answer = await self._send(replica, request)
            if answer.streamed:
                async for _ in answer.chunks():
                    pass
            else:
                await answer.read()
        except (NotConnectedError, BrokenAnswerError, TimeoutError):
            pass  # a shadow's failure is its own business, never the caller's

    async def _send(self, replica: str, request: Outgoing) -> Answer:
        """Send `request` to `replica` and wait for the answer's head (the pool's errors)."""
        timeout_s = self._options.request_timeout_s
        return await self._connections().send(replica, request.head, request.body, timeout_s)

    async def close(self) -> None:
        """Wait briefly for shadow copies, then close every connection."""
        if self._shadows:
            await asyncio.wait(set(self._shadows), timeout=self._options.connect_timeout_s)
        if self._pool is not None:
            self._pool.close()
            self._pool = None
