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

import aiohttp
from yarl import URL

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
# the request not having reached the replica: safe to send it to another one
_NOT_CONNECTED = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
# headers aiohttp would add on its own; the replica sees the caller's (the body and its
# Content-Encoding pass through untouched, so an Accept-Encoding must be the caller's)
_NO_AUTO_HEADERS = ("Accept-Encoding", "Content-Type", "User-Agent")
# uvicorn (the replicas' server) drops an idle connection after 5 s: let go of it first, so a
# request does not go out on a connection the replica is closing (aiohttp retries no POST)
_KEEPALIVE_S = 4.0


@dataclass(frozen=True)
class Outgoing:
    """A request to send to some replica: `target` is the path plus query string."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


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
        self._session: aiohttp.ClientSession | None = None
        self.breakers: dict[str, CircuitBreaker] = {}
        self._shadows: set[asyncio.Task[None]] = set()

    def _client(self) -> aiohttp.ClientSession:
        """The shared session, made on first use (aiohttp binds it to the running loop)."""
        if self._session is None:
            options = self._options
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=512, keepalive_timeout=_KEEPALIVE_S),
                # sock_read bounds each wait for bytes (not the whole answer), so a long
                # event stream still flows; connect also bounds the wait for a free connection
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=options.request_timeout_s,
                    sock_connect=options.connect_timeout_s,
                    sock_read=options.request_timeout_s,
                ),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=_NO_AUTO_HEADERS,
            )
        return self._session

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
            response = await self._send(replica, request)
        except _NOT_CONNECTED:
            breaker.failure(self._clock())
            return None
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self._failed(replica, breaker, error) from error
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROP_RESPONSE]
        if response.content_type == "text/event-stream":
            return Forwarded(response.status, headers, b"", _relay(response), replica)
        try:
            body = await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self._failed(replica, breaker, error) from error
        finally:
            response.release()
        return Forwarded(response.status, headers, body, None, replica)

    def _failed(self, replica: str, breaker: CircuitBreaker, error: Exception) -> ForgemlError:
        """Count a failure once the request was sent: the error to answer with (504 or 502)."""
        breaker.failure(self._clock())
        if isinstance(error, TimeoutError):
            return UpstreamTimeoutError(f"Replica {replica} did not answer in time.")
        return BadGatewayError(f"Replica {replica} broke the connection: {_reason(error)}.")

    def shadow(self, replica: str, request: Outgoing) -> None:
        """Send a copy to `replica` in the background; its answer and failure are ignored."""
        if len(self._shadows) >= self._options.max_shadow_in_flight:
            return  # shed shadow load rather than queue it behind real traffic
        task = asyncio.create_task(self._send_shadow(replica, request))
        self._shadows.add(task)
        task.add_done_callback(self._shadows.discard)

    async def _send_shadow(self, replica: str, request: Outgoing) -> None:
        try:
            response = await self._send(replica, request)
            try:
                await response.read()
            finally:
                response.release()
        except (aiohttp.ClientError, TimeoutError):
            pass  # a shadow's failure is its own business, never the caller's

    async def _send(self, replica: str, request: Outgoing) -> aiohttp.ClientResponse:
        """Send `request` and wait for the answer's head; the body is left to the caller."""
        # encoded=True: the caller's path and query go out byte for byte, not re-quoted
        url = URL(replica + request.target, encoded=True)
        return await self._client().request(
            request.method, url, headers=request.headers, data=request.body or None,
            allow_redirects=False,
        )  # fmt: skip

    async def close(self) -> None:
        """Wait briefly for shadow copies, then close every connection."""
        if self._shadows:
            await asyncio.wait(set(self._shadows), timeout=self._options.connect_timeout_s)
        if self._session is not None:
            await self._session.close()
            self._session = None


def _relay(response: aiohttp.ClientResponse) -> Stream:
    """`response`'s body as it arrives, and the call that gives its connection back."""

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.content.iter_any():
                yield chunk
        finally:  # also when the caller hangs up mid-stream and the generator is dropped
            response.release()

    async def close() -> None:
        response.release()  # an unfinished body makes aiohttp close rather than reuse it

    return Stream(chunks(), close)


def _reason(error: Exception) -> str:
    """One line on what went wrong (aiohttp's messages can span lines and quote the request)."""
    text = error.message if isinstance(error, aiohttp.ClientResponseError) else str(error)
    lines = text.strip().splitlines()
    return lines[0].rstrip(":. ") if lines else type(error).__name__
