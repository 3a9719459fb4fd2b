from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from forgeml.serve import transport
from forgeml.serve.transport import CoalescingTransport
from tests.gateway.conftest import ServerThread


class _Recorder:
    """A transport that records its writes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None


def test_writes_of_one_loop_turn_leave_as_one() -> None:
    async def run() -> _Recorder:
        recorder = _Recorder()
        coalescing = CoalescingTransport(recorder, asyncio.get_running_loop())  # type: ignore[arg-type]
        coalescing.write(b"HTTP/1.1 200 OK\r\n\r\n")
        coalescing.write(b"body")
        assert recorder.writes == [] and coalescing.get_write_buffer_size() == 23
        await asyncio.sleep(0)
        coalescing.write(b"next")
        await asyncio.sleep(0)
        assert coalescing.get_extra_info("peername") == ("127.0.0.1", 1)
        return recorder

    assert asyncio.run(run()).writes == [b"HTTP/1.1 200 OK\r\n\r\nbody", b"next"]


def test_close_sends_what_is_pending_and_a_closed_transport_drops_it() -> None:
    async def run() -> tuple[_Recorder, _Recorder]:
        loop = asyncio.get_running_loop()
        first, second = _Recorder(), _Recorder()
        closing = CoalescingTransport(first, loop)  # type: ignore[arg-type]
        closing.write(b"last words")
        closing.close()
        gone = CoalescingTransport(second, loop)  # type: ignore[arg-type]
        gone.write(b"too late")
        second.closing = True
        await asyncio.sleep(0)
        return first, second

    first, second = asyncio.run(run())
    assert first.writes == [b"last words"] and first.closing
    assert second.writes == []


async def _small(request: Request) -> JSONResponse:
    return JSONResponse({"echo": (await request.body()).decode()})


class _Acked:
    """An event stream whose next event waits until the client said it got the last one.

    A server that held the stream back until its end would never hear of the first event.
    """

    def __init__(self, events: int) -> None:
        self.received = [threading.Event() for _ in range(events)]
        self.heard: list[bool] = []

    async def respond(self, request: Request) -> StreamingResponse:
        async def events() -> Any:
            for i, received in enumerate(self.received):
                yield f"data: {i}\n\n"
                self.heard.append(await asyncio.to_thread(received.wait, 10))

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    flushes: list[int] = []
    real_flush = CoalescingTransport.flush

    def counted(self: CoalescingTransport) -> None:
        flushes.append(len(self._pending))
        real_flush(self)

    monkeypatch.setattr(transport.CoalescingTransport, "flush", counted)
    acked = _Acked(3)
    app = Starlette(
        routes=[Route("/small", _small, methods=["POST"]), Route("/sse", acked.respond)]
    )
    running = ServerThread(app)
    yield running, flushes, acked
    running.stop()


def test_a_real_server_answers_in_one_write_and_streams_chunk_by_chunk(server: Any) -> None:
    running, flushes, acked = server
    with httpx.Client(base_url=running.url) as client:
        for i in range(3):  # keep-alive: one connection, three requests
            assert client.post("/small", content=f"r{i}").json() == {"echo": f"r{i}"}
        assert flushes == [2, 2, 2]  # head and body, gathered into one write each time
        flushes.clear()
        text = ""
        with client.stream("GET", "/sse") as response:
            for chunk in response.iter_text():
                text += chunk
                for i in range(text.count("\n\n")):
                    acked.received[i].set()
        assert text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
        assert acked.heard == [True, True, True]  # each event went out as it came
        assert len(flushes) >= 3


def test_a_connection_closed_by_the_server_still_gets_its_answer(server: Any) -> None:
    running, *_ = server
    host, port = running.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        body = b"bye"
        sock.sendall(
            b"POST /small HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
            b"content-length: 3\r\n\r\n" + body
        )
        received = b""
        while chunk := sock.recv(65536):  # the server closes after answering
            received += chunk
    assert received.startswith(b"HTTP/1.1 200 OK") and received.endswith(b'{"echo":"bye"}')
