"""Keep-alive HTTP/1.1 connections to replicas: asyncio protocols around httptools' parser.

The gateway's hop to a replica is on the path of every forwarded call, and a general client
costs more there than the hop itself: aiohttp spent ~0.3 ms of CPU per forwarded request
on this project's 2-core VM (its request and response objects, timers, tracing hooks),
against ~0.1 ms for a protocol that writes the request in one call and lets httptools (the
C parser uvicorn uses for the other direction) read the answer. A replica is always one of
the gateway's own model servers over plain HTTP on a known origin, so this pool does only
what forwarding to one needs: connect with a timeout, reuse idle connections for a while,
cap the connections open, and read an answer whole or as a stream of chunks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools


class NotConnectedError(Exception):
    """The request never reached the replica: it is safe to send it elsewhere."""


class BrokenAnswerError(Exception):
    """The replica broke the connection or HTTP after the request went out."""


# an event stream is relayed chunk by chunk; every other answer is read whole
_STREAMED = "text/event-stream"
# answers that never have a body (RFC 9110 §6.4.1)
_NO_BODY = frozenset({204, 304})
# a streamed answer stops being read while this many chunks wait for the caller
_PAUSE_AT, _RESUME_AT = 64, 16


@dataclass(frozen=True)
class Origin:
    """Where a replica listens."""

    host: str
    port: int
    authority: bytes  # the Host header

    @classmethod
    def of(cls, url: str) -> Origin:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"A replica URL must be http://HOST:PORT, not {url!r}.")
        port = parts.port or 80
        return cls(parts.hostname, port, parts.netloc.encode("latin-1"))


class _Connection(asyncio.Protocol):
    """One connection to one replica, carrying one exchange at a time."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._head: asyncio.Future[int] | None = None
        self._done: asyncio.Future[None] | None = None
        self._headers: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        # a streamed answer's chunks, then None at its end or the error that cut it short
        self._chunks: asyncio.Queue[bytes | Exception | None] | None = None
        self._paused = False
        self._complete = False
        self._keep_alive = False
        self._until_close = False  # a body with neither length nor chunks ends with the connection
        self._timeout_s = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        if self._until_close and not self._complete:
            self.on_message_complete()
        elif self._head is not None and not self._head.done():
            self._fail(BrokenAnswerError("it closed the connection before answering"))
        elif self._done is not None and not self._done.done():
            self._fail(BrokenAnswerError("it closed the connection mid-answer"))

    def data_received(self, data: bytes) -> None:
        if self._done is None or self._done.done():
            self.close()  # bytes nobody asked for: this connection cannot be trusted
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(BrokenAnswerError(f"it sent malformed HTTP ({error})"))
            self.close()

    # --- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        if self._interim():
            return  # a 1xx ("100 Continue"): the answer is still to come
        framed = self._parser.get_status_code() in _NO_BODY
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == "content-type" and value.startswith(_STREAMED):
                self._chunks = asyncio.Queue()
            framed = framed or lowered in ("content-length", "transfer-encoding")
        self._until_close = not framed
        if self._head is not None and not self._head.done():
            self._head.set_result(self._parser.get_status_code())

    def on_body(self, body: bytes) -> None:
        if self._chunks is None:
            self._body.append(body)
            return
        self._chunks.put_nowait(body)
        self._arm()  # a stream may go on for long: the limit is on each silence
        if self._chunks.qsize() >= _PAUSE_AT and self.transport is not None:
            self.transport.pause_reading()
            self._paused = True

    def on_message_complete(self) -> None:
        if self._interim():
            self._headers = []  # an interim answer's headers are not the answer's
            return
        self._disarm()
        self._complete = True
        self._keep_alive = self._parser.should_keep_alive() and not self._until_close
        if self._chunks is not None:
            self._chunks.put_nowait(None)
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _interim(self) -> bool:
        return 100 <= self._parser.get_status_code() < 200

    # --- one exchange

    def send(self, request: bytes, timeout_s: float) -> None:
        """Write `request` (head and body) and get ready to read its answer.

        The whole answer must arrive within `timeout_s`, or else its futures fail with
        TimeoutError and the connection is closed; a streamed answer gets `timeout_s` from
        each chunk to the next instead.
        """
        loop = asyncio.get_running_loop()
        self._head, self._done = loop.create_future(), loop.create_future()
        self._headers, self._body, self._chunks = [], [], None
        self._complete = self._until_close = False
        self._timeout_s = timeout_s
        self._arm()
        assert self.transport is not None
        self.transport.write(request)

    async def head(self) -> tuple[int, list[tuple[str, str]]]:
        """The answer's status and headers."""
        assert self._head is not None
        return await self._head, self._headers

    @property
    def streamed(self) -> bool:
        return self._chunks is not None

    async def body(self) -> bytes:
        """The rest of a whole answer."""
        assert self._done is not None
        await self._done
        return b"".join(self._body)

    async def chunks(self) -> AsyncIterator[bytes]:
        """A streamed answer's chunks as they arrive."""
        assert self._chunks is not None
        while True:
            chunk = await self._chunks.get()
            if chunk is None:
                return
            if isinstance(chunk, Exception):
                raise chunk
            if self._paused and self._chunks.qsize() <= _RESUME_AT and self.transport is not None:
                self.transport.resume_reading()
                self._paused = False
            yield chunk

    @property
    def reusable(self) -> bool:
        """Whether the last exchange ended cleanly on a connection both sides keep open."""
        return self._complete and self._keep_alive and not self.closed

    def _fail(self, error: Exception) -> None:
        for future in (self._head, self._done):
            if future is not None and not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a failed stream nobody reads is not an error
        if self._chunks is not None:
            self._chunks.put_nowait(error)

    def _arm(self) -> None:
        self._disarm()
        self._timer = asyncio.get_running_loop().call_later(self._timeout_s, self._time_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _time_out(self) -> None:
        self._timer = None
        self._fail(TimeoutError())
        self.close()

    def close(self) -> None:
        """Close the connection; a pending exchange fails as the connection is lost."""
        self.closed = True
        self._disarm()
        if self.transport is not None:
            self.transport.close()


class Answer:
    """A replica's answer: status and headers now, the body whole or streamed after."""

    def __init__(
        self, pool: Pool, connection: _Connection, status: int, headers: list[tuple[str, str]]
    ) -> None:
        self._pool, self._connection = pool, connection
        self.status: int = status
        self.headers: list[tuple[str, str]] = headers
        self.streamed = connection.streamed
        self._released = False

    async def read(self) -> bytes:
        """The whole body; the connection goes back to the pool."""
        try:
            return await self._connection.body()
        finally:
            self.release()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; the connection goes back to the pool at its end."""
        try:
            async for chunk in self._connection.chunks():
                yield chunk
        finally:
            self.release()

    def release(self) -> None:
        """Give the connection back (kept only if its answer ended cleanly); idempotent."""
        if not self._released:
            self._released = True
            self._pool.give_back(self._connection)

    async def close(self) -> None:
        """`release` for a caller that awaits its clean-up (an unfinished answer is cut)."""
        self.release()


class Pool:
    """Idle connections per replica, at most `limit` open, reused for `keepalive_s`.

    `clock` times only how long a connection has been idle (the keep-alive expiry).
    """

    def __init__(
        self,
        limit: int,
        connect_timeout_s: float,
        keepalive_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect_timeout_s = connect_timeout_s
        self._keepalive_s = keepalive_s
        self._clock = clock
        self._slots = asyncio.Semaphore(limit)
        self._idle: dict[Origin, list[_Connection]] = {}
        self._origins: dict[str, Origin] = {}
        self._open: set[_Connection] = set()

    async def send(self, replica: str, head: bytes, body: bytes, timeout_s: float) -> Answer:
        """Send one request to `replica` and wait for its answer's head.

        Args:
            replica: the replica's base URL (http://HOST:PORT).
            head: the request line and headers, without Host and Content-Length.
            body: the request body.
            timeout_s: how long the answer may take once the request is out (a streamed
                answer: how long each chunk may take after the one before).

        Raises:
            NotConnectedError: no connection could be had within the connect timeout.
            BrokenAnswerError: the replica broke the connection or HTTP.
            TimeoutError: no answer within `timeout_s`.
        """
        origin = self._origins.get(replica) or self._origins.setdefault(replica, Origin.of(replica))
        connection = await self._take(origin)
        framing = b"host: %s\r\ncontent-length: %d\r\n\r\n" % (origin.authority, len(body))
        connection.send(head + framing + body, timeout_s)
        try:
            status, headers = await connection.head()
        except BaseException:
            self.give_back(connection)
            raise
        return Answer(self, connection, status, headers)

    async def _take(self, origin: Origin) -> _Connection:
        """An idle connection to `origin` fresh enough to reuse, else a new one."""
        if self._slots.locked():  # every connection in use: wait for one, but not forever
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    await self._slots.acquire()
            except TimeoutError as error:
                raise NotConnectedError("no free connection in time") from error
        else:
            await self._slots.acquire()  # free: returns at once, no timer needed
        idle, now = self._idle.get(origin), self._clock()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < self._keepalive_s:
                return connection
            self._discard(connection)
        try:
            return await self._connect(origin)
        except BaseException:
            self._slots.release()
            raise

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(origin), origin.host, origin.port
                )
        except (OSError, TimeoutError) as error:
            raise NotConnectedError(str(error) or type(error).__name__) from error
        self._open.add(connection)
        return connection

    @property
    def idle(self) -> int:
        """How many idle connections are kept and still open."""
        return sum(not c.closed for kept in self._idle.values() for c in kept)

    def give_back(self, connection: _Connection) -> None:
        """Keep `connection` for reuse if its exchange ended cleanly, else close it."""
        self._slots.release()
        if connection.reusable:
            connection.idle_since = self._clock()
            self._idle.setdefault(connection.origin, []).append(connection)
            return
        self._discard(connection)

    def _discard(self, connection: _Connection) -> None:
        self._open.discard(connection)
        connection.close()

    def close(self) -> None:
        """Close every connection, idle or not."""
        for connection in list(self._open):
            self._discard(connection)
        self._idle.clear()
