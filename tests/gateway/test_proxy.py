from __future__ import annotations

import asyncio
import gzip
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass, field

import pytest

from forgeml.core.errors import (
    BadGatewayError,
    ForgemlError,
    ServiceUnavailableError,
    UpstreamTimeoutError,
)
from forgeml.gateway import GatewayOptions
from forgeml.gateway._proxy import Forwarded, Outgoing, Upstreams, request_headers
from tests._wait import wait_until_async
from tests.gateway.conftest import dead_url

REQUEST = Outgoing("POST", "/v2/models/d/infer", [("content-type", "application/json")], b"{}")
OPTIONS = GatewayOptions(breaker_failures=1, request_timeout_s=0.5, connect_timeout_s=0.3)

Reader, Writer = asyncio.StreamReader, asyncio.StreamWriter
Behaviour = Callable[[bytes, Reader, Writer], Awaitable[None]]


@dataclass
class Replica:
    """A raw-socket replica on loopback: it records each request, then `behave`s."""

    behave: Behaviour
    requests: list[bytes] = field(default_factory=list)
    url: str = ""

    async def handle(self, reader: Reader, writer: Writer) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            body = await reader.readexactly(_content_length(head))
            self.requests.append(head + body)
            await self.behave(head + body, reader, writer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _content_length(head: bytes) -> int:
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            return int(value)
    return 0


def _answer(status: int = 200, body: bytes = b'{"ok": true}', extra: str = "") -> Behaviour:
    async def behave(request: bytes, reader: Reader, writer: Writer) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        writer.write(head.encode() + body)

    return behave


async def _hang(request: bytes, reader: Reader, writer: Writer) -> None:
    await reader.read()  # until the gateway hangs up


async def _hang_up(request: bytes, reader: Reader, writer: Writer) -> None:
    pass  # the connection closes without a byte of answer


async def _garble(request: bytes, reader: Reader, writer: Writer) -> None:
    writer.write(b"nonsense\r\n\r\n")


async def _stall_mid_body(request: bytes, reader: Reader, writer: Writer) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{")
    await writer.drain()
    await reader.read()


async def _cut_mid_body(request: bytes, reader: Reader, writer: Writer) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{")


@asynccontextmanager
async def _running(*replicas: Replica) -> AsyncIterator[None]:
    servers = []
    for replica in replicas:
        server = await asyncio.start_server(replica.handle, "127.0.0.1", 0)
        replica.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        servers.append(server)
    try:
        yield
    finally:
        for server in servers:
            server.close()


def _forward(
    a: Replica, b: Replica, request: Outgoing = REQUEST
) -> tuple[Upstreams, Forwarded | ForgemlError]:
    """Forward `request` to replicas a then b."""

    async def run() -> tuple[Upstreams, Forwarded | ForgemlError]:
        upstreams = Upstreams(OPTIONS)
        async with _running(a, b):
            try:
                return upstreams, await upstreams.forward("d", [a.url, b.url], request)
            except ForgemlError as error:
                return upstreams, error
            finally:
                await upstreams.close()

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("behave", "expected", "status", "reason"),
    [
        (_hang, UpstreamTimeoutError, 504, "did not answer in time"),
        (_stall_mid_body, UpstreamTimeoutError, 504, "did not answer in time"),
        (_hang_up, BadGatewayError, 502, "closed the connection before answering"),
        (_garble, BadGatewayError, 502, "malformed HTTP"),
        (_cut_mid_body, BadGatewayError, 502, "closed the connection mid-answer"),
    ],
)
def test_failure_after_sending_is_not_retried_and_opens_the_breaker(
    behave: Behaviour, expected: type, status: int, reason: str
) -> None:
    a, b = Replica(behave), Replica(_answer())
    upstreams, outcome = _forward(a, b)
    assert isinstance(outcome, expected) and outcome.http_status == status
    assert f"Replica {a.url}" in str(outcome) and reason in str(outcome)
    assert "\n" not in str(outcome)
    assert upstreams.breakers[a.url].state == "open"
    assert b.url not in upstreams.breakers and not b.requests  # the model may have run it


@contextmanager
def _unreachable() -> Iterator[str]:
    """A loopback URL whose listener never accepts and whose queue is full: connects hang."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = [socket.socket() for _ in range(2)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for sock in (*fillers, listener):
            sock.close()


@pytest.mark.parametrize("hang", [False, True], ids=["refused", "connect-timeout"])
def test_connect_failure_is_retried_on_the_next_replica(hang: bool) -> None:
    b = Replica(_answer(body=b"ok"))

    async def run(a_url: str) -> tuple[Upstreams, Forwarded]:
        upstreams = Upstreams(OPTIONS)
        async with _running(b):
            try:
                # a connect left to hang fails here rather than answering from b at all
                async with asyncio.timeout(10):
                    return upstreams, await upstreams.forward("d", [a_url, b.url], REQUEST)
            finally:
                await upstreams.close()

    with _unreachable() if hang else nullcontext(dead_url()) as a_url:
        upstreams, outcome = asyncio.run(run(a_url))
    assert (outcome.replica, outcome.status, outcome.body) == (b.url, 200, b"ok")
    assert upstreams.breakers[a_url].state == "open"


def test_503_is_retried_elsewhere_and_the_last_one_is_returned() -> None:
    upstreams, outcome = _forward(Replica(_answer(503)), Replica(_answer()))
    assert isinstance(outcome, Forwarded) and outcome.status == 200
    assert [breaker.state for breaker in upstreams.breakers.values()] == ["open", "closed"]
    both = (Replica(_answer(503, b"a")), Replica(_answer(502, b"b")))
    _, outcome = _forward(*both)
    assert isinstance(outcome, Forwarded) and (outcome.status, outcome.body) == (502, b"b")
    assert [len(replica.requests) for replica in both] == [1, 1]


def test_every_replica_refusing_is_a_503() -> None:
    async def run() -> ForgemlError:
        upstreams = Upstreams(OPTIONS)
        try:
            await upstreams.forward("d", [dead_url(), dead_url()], REQUEST)
        except ForgemlError as error:
            return error
        finally:
            await upstreams.close()
        raise AssertionError("a dead replica answered")

    outcome = asyncio.run(run())
    assert isinstance(outcome, ServiceUnavailableError) and "tried (2)" in str(outcome)


def test_headers_drop_hop_by_hop_and_credentials_and_bodies_pass_untouched() -> None:
    packed = gzip.compress(b'{"answer": 42}')
    replica = Replica(
        _answer(
            body=packed,
            extra="Content-Encoding: gzip\r\nX-Model: m@v1\r\nKeep-Alive: timeout=5\r\n"
            "Connection: close\r\nServer: uvicorn\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n",
        )
    )
    caller = [
        ("Host", "gateway:8080"), ("Authorization", "Bearer fml_secret"),
        ("X-Api-Key", "fml_other"), ("Connection", "keep-alive"), ("TE", "trailers"),
        ("Content-Type", "application/json"), ("X-Request-Id", "r-1"), ("Expect", "100-continue"),
    ]  # fmt: skip
    request = Outgoing(
        "POST", "/v1/models/a%2fb%7e:predict?q=%20x&q=%41", request_headers(caller), b"{}"
    )
    _, outcome = _forward(replica, Replica(_answer()), request)
    assert isinstance(outcome, Forwarded) and outcome.body == packed
    line, *lines = replica.requests[0].decode("latin-1").split("\r\n")
    assert line == "POST /v1/models/a%2fb%7e:predict?q=%20x&q=%41 HTTP/1.1"  # byte for byte
    sent = dict(tuple(line.lower().split(": ", 1)) for line in lines if ": " in line)
    dropped = {"authorization", "x-api-key", "connection", "te", "accept-encoding", "expect"}
    assert not dropped & sent.keys() and sent["host"] == replica.url.removeprefix("http://")
    assert (sent["x-request-id"], sent["content-type"]) == ("r-1", "application/json")
    names = {name.lower() for name, _ in outcome.headers}
    assert names == {"content-encoding", "x-model"}


def test_server_sent_events_are_relayed_as_they_arrive() -> None:
    async def run() -> tuple[bytes, list[bytes], list[tuple[str, str]]]:
        more = asyncio.Event()

        async def events(request: bytes, reader: Reader, writer: Writer) -> None:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
            writer.write(b"Transfer-Encoding: chunked\r\n\r\n" + _chunk(b"data: 1\n\n"))
            await writer.drain()
            await more.wait()
            writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

        replica, upstreams = Replica(events), Upstreams(OPTIONS)
        async with _running(replica):
            try:
                answer = await upstreams.forward("d", [replica.url], REQUEST)
                assert answer.stream is not None and answer.body == b""
                # a buffering proxy waits for the end, which never comes before `more`
                first = await asyncio.wait_for(anext(answer.stream.chunks), 2.0)
                more.set()
                rest = [chunk async for chunk in answer.stream.chunks]
                await answer.stream.close()
            finally:
                await upstreams.close()
        return first, rest, answer.headers

    first, rest, headers = asyncio.run(run())
    assert first == b"data: 1\n\n" and b"".join(rest) == b"data: [DONE]\n\n"
    assert headers == [("Content-Type", "text/event-stream")]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_shadows_are_capped_never_fail_the_caller_and_close_ends_the_stuck_ones() -> None:
    async def run() -> tuple[Replica, Replica, Replica]:
        hung_up = asyncio.Event()

        async def stuck_until_hung_up(request: bytes, reader: Reader, writer: Writer) -> None:
            await reader.read()  # until the gateway hangs up
            hung_up.set()

        quick = Replica(_answer(body=json.dumps({"shadow": True}).encode()))
        later = Replica(_answer())
        stuck = Replica(stuck_until_hung_up)
        # the stuck one would time out on its own only long after close must have ended it
        options = OPTIONS.model_copy(update={"max_shadow_in_flight": 2, "request_timeout_s": 60})
        upstreams = Upstreams(options)
        async with _running(quick, stuck, later):
            upstreams.shadow(quick.url, REQUEST)
            upstreams.shadow(stuck.url, REQUEST)
            upstreams.shadow(quick.url, REQUEST)  # over the cap: dropped, not queued
            await wait_until_async(
                lambda: upstreams.shadows_in_flight == 1 and stuck.requests,
                what="the quick shadow done and the stuck one sent",
            )
            upstreams.shadow(later.url, REQUEST)  # the quick one is done: room for this
            await wait_until_async(lambda: later.requests, what="the later shadow arriving")
            async with asyncio.timeout(10):  # a close that waits on the stuck one forever fails
                await upstreams.close()
            await wait_until_async(hung_up.is_set, what="the stuck shadow's connection closing")
            await wait_until_async(
                lambda: upstreams.shadows_in_flight == 0, what="every shadow ending"
            )
            return quick, stuck, later

    quick, stuck, later = asyncio.run(run())
    assert [len(r.requests) for r in (quick, stuck, later)] == [1, 1, 1]
    assert quick.requests[0].endswith(b"\r\n\r\n{}")
