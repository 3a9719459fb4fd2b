"""The replica connection pool against raw-socket servers that count their connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from forgeml.gateway._upstream import BrokenAnswerError, NotConnectedError, Origin, Pool
from tests._wait import FakeClock, FakeClockLoop, wait_until_async

HEAD = b"POST /v1/models/m:predict HTTP/1.1\r\ncontent-type: application/json\r\n"
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
Answering = Callable[[int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


@dataclass
class Server:
    """Reads requests on each connection and answers them with `answer(n)`; False: hang up."""

    answer: Answering
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                self.requests.append(head + await reader.readexactly(length))
                if not await self.answer(len(self.requests), reader, writer):
                    break
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _ok(extra: bytes = b"") -> Answering:
    async def answer(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        body = b"answer %d" % n
        writer.write(
            b"HTTP/1.1 200 OK\r\n%scontent-length: %d\r\n\r\n%s" % (extra, len(body), body)
        )
        return b"close" not in extra

    return answer


@asynccontextmanager
async def _serving(server: Server) -> AsyncIterator[Server]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        yield server
    finally:
        listener.close()


def _pool(limit: int = 8, connect_timeout_s: float = 1.0, clock: FakeClock | None = None) -> Pool:
    return Pool(limit, connect_timeout_s, keepalive_s=4.0, clock=clock or FakeClock())


async def _call(pool: Pool, server: Server, body: bytes = b"{}") -> tuple[int, bytes]:
    answer = await pool.send(server.url, HEAD, body, timeout_s=2.0)
    return answer.status, await answer.read()


def test_sequential_requests_share_one_connection_and_get_host_and_length() -> None:
    async def run() -> tuple[list[tuple[int, bytes]], Server]:
        pool = _pool()
        async with _serving(Server(_ok())) as server:
            answers = [await _call(pool, server, b'{"n": %d}' % i) for i in range(3)]
            pool.close()
        return answers, server

    answers, server = asyncio.run(run())
    assert answers == [(200, b"answer 1"), (200, b"answer 2"), (200, b"answer 3")]
    assert server.connections == 1
    authority = server.url.removeprefix("http://").encode()
    assert server.requests[2] == HEAD + b'host: %s\r\ncontent-length: 8\r\n\r\n{"n": 2}' % authority


@pytest.mark.parametrize(
    ("answer", "idle_s", "connections"),
    [
        (_ok(b"connection: close\r\n"), 0.0, 2),  # the replica said it closes
        (_ok(), 4.0, 2),  # idle for keepalive_s
        (_ok(), 3.9, 1),  # reused: idle for less
    ],
    ids=["connection-close", "expired", "fresh"],
)
def test_a_connection_is_reused_only_while_both_sides_keep_it(
    answer: Answering, idle_s: float, connections: int
) -> None:
    async def run() -> Server:
        clock = FakeClock()
        pool = _pool(clock=clock)
        async with _serving(Server(answer)) as server:
            assert await _call(pool, server) == (200, b"answer 1")
            clock.advance(idle_s)
            assert (await _call(pool, server))[0] == 200
            pool.close()
        return server

    assert asyncio.run(run()).connections == connections


def test_a_connection_the_replica_closed_while_idle_is_not_used() -> None:
    async def hang_up_after_answering(
        n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        await _ok()(n, reader, writer)
        return False  # closes without saying so, as a replica going away does

    async def run() -> Server:
        pool = _pool()
        async with _serving(Server(hang_up_after_answering)) as server:
            assert await _call(pool, server) == (200, b"answer 1")
            await wait_until_async(lambda: pool.idle == 0, what="the replica's close arriving")
            assert await _call(pool, server) == (200, b"answer 2")
            pool.close()
        return server

    assert asyncio.run(run()).connections == 2


def test_chunked_and_close_delimited_bodies_are_read_whole() -> None:
    async def chunked(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        return True

    async def until_close(
        n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it")
        return False

    async def run() -> list[tuple[int, bytes]]:
        pool = _pool()
        found = []
        for answer in (chunked, until_close):
            async with _serving(Server(answer)) as server:
                found.append(await _call(pool, server))
        pool.close()
        return found

    assert asyncio.run(run()) == [(200, b"abcde"), (200, b"all of it")]


def test_an_interim_100_continue_is_not_taken_for_the_answer() -> None:
    async def continue_first(
        n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return await _ok(b"x-final: yes\r\n")(n, reader, writer)

    async def run() -> tuple[int, list[tuple[str, str]], bytes]:
        pool = _pool()
        async with _serving(Server(continue_first)) as server:
            answer = await pool.send(server.url, HEAD, b"{}", timeout_s=2.0)
            found = answer.status, answer.headers, await answer.read()
            assert await _call(pool, server) == (200, b"answer 2")  # the connection still works
        pool.close()
        return found

    assert asyncio.run(run()) == (200, [("x-final", "yes"), ("content-length", "8")], b"answer 1")


def test_past_the_connection_limit_a_request_waits_then_is_not_connected() -> None:
    async def hang(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await reader.read()
        return False

    async def run() -> None:
        pool = _pool(limit=1, connect_timeout_s=0.2)
        async with _serving(Server(hang)) as server:
            first = asyncio.create_task(pool.send(server.url, HEAD, b"{}", timeout_s=5.0))
            await wait_until_async(lambda: server.requests, what="the first request arriving")
            with pytest.raises(NotConnectedError, match="no free connection"):
                await pool.send(server.url, HEAD, b"{}", timeout_s=5.0)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            pool.close()

    asyncio.run(run())


def _streamed_until(answer: Answering, timeout_s: float, error: type[Exception]) -> list[bytes]:
    """The chunks a streamed answer gave before it failed with `error`."""

    async def run() -> list[bytes]:
        pool, received = _pool(), []
        async with _serving(Server(answer)) as server:
            streamed = await pool.send(server.url, HEAD, b"{}", timeout_s=timeout_s)
            assert streamed.streamed
            with pytest.raises(error):
                async for chunk in streamed.chunks():
                    received.append(chunk)
        pool.close()
        return received

    return asyncio.run(run())


def test_a_stream_cut_mid_answer_is_an_error() -> None:
    async def stream_then_cut(
        n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        writer.write(SSE_HEAD + b"9\r\ndata: 1\n\n\r\n")
        await writer.drain()
        return False  # hang up mid-stream

    assert _streamed_until(stream_then_cut, 2.0, BrokenAnswerError) == [b"data: 1\n\n"]


def test_a_stream_may_outlast_the_timeout_but_not_fall_silent_past_it() -> None:
    # the loop's clock moves only when the test advances it: each silence between chunks is
    # exactly as long as the test says, however slowly the machine runs
    clock, chunk = FakeClock(), b"9\r\ndata: x\n\n\r\n"

    async def run() -> list[bytes]:
        more: asyncio.Queue[bytes] = asyncio.Queue()

        async def stream(
            n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> bool:
            writer.write(SSE_HEAD)
            for _ in range(5):
                writer.write(await more.get())
                await writer.drain()
            await reader.read()  # then silence
            return False

        pool, received = _pool(), []
        async with _serving(Server(stream)) as server:
            streamed = await pool.send(server.url, HEAD, b"{}", timeout_s=1.0)
            more.put_nowait(chunk)
            with pytest.raises(TimeoutError):
                async for data in streamed.chunks():
                    received.append(data)
                    if len(received) < 5:
                        clock.advance(0.75)  # four silences inside the 1 s, 3 s in all
                        more.put_nowait(chunk)
                    else:
                        clock.advance(1.0)  # the fifth reaches it
        pool.close()
        return received

    with asyncio.Runner(loop_factory=lambda: FakeClockLoop(clock)) as runner:
        assert runner.run(run()) == [b"data: x\n\n"] * 5


def test_bytes_after_an_answer_nobody_asked_for_retire_the_connection() -> None:
    async def run() -> Server:
        answered = asyncio.Event()  # set once the answer is read and the connection idle

        async def then_junk(
            n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> bool:
            await _ok()(n, reader, writer)
            await writer.drain()
            if n == 1:
                await answered.wait()
                writer.write(b"junk")
            return True

        pool = _pool()
        async with _serving(Server(then_junk)) as server:
            assert await _call(pool, server) == (200, b"answer 1")
            assert pool.idle == 1
            answered.set()
            await wait_until_async(lambda: pool.idle == 0, what="the junk retiring the connection")
            assert await _call(pool, server) == (200, b"answer 2")
            pool.close()
        return server

    assert asyncio.run(run()).connections == 2


def test_only_plain_http_replicas() -> None:
    assert Origin.of("http://127.0.0.1:8001") == Origin("127.0.0.1", 8001, b"127.0.0.1:8001")
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        Origin.of("https://replica:8001")
